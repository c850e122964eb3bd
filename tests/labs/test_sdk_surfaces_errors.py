"""Mid-stream failures as real clients see them (`server-midstream-error`).

After the first byte the status is 200: only the body can say that something failed. These tests
pin down who can tell: the official `openai` SDK raises on the in-band error and on a crash, and
cannot tell a silent close or a fake [DONE] from a short answer; the measuring client reports each
case by its outcome, also behind every proxy's production config.
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterator

import openai
import pytest

from labs import client
from labs.scenario.runner import Lab
from labs.scenario.model import Variant
from server.launcher import ServerHandle

SCRIPT = "Every token should reach the reader the moment the model makes it."
AFTER = 5  # tokens before the failure
MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    # The synthetic engine: the failures are in the HTTP layer, the model does not matter.
    with Lab(engine="synthetic") as shared:
        yield shared


@pytest.fixture(scope="module")
def server(synthetic_server: ServerHandle) -> ServerHandle:
    return synthetic_server  # the one lab.server() would start, shared by the session


def _lab(**knobs: Any) -> dict[str, Any]:
    return {"script": SCRIPT, "tokens_per_s": 200.0, **knobs}


def _sdk_stream(server: ServerHandle, lab: dict[str, Any]) -> tuple[str, str | None]:
    """Consume a stream with the SDK as an app would: (text, finish_reason)."""
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=20) as sdk:
        stream = sdk.chat.completions.create(model="tiny", messages=MESSAGES, stream=True,
                                             extra_body={"lab": lab})
        text, finish = "", None
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        return text, finish


def _measure(url: str, lab: dict[str, Any]) -> client.StreamResult:
    body = {"model": "tiny", "messages": MESSAGES, "stream": True, "lab": lab}
    return asyncio.run(client.measure_stream(url + "/v1/chat/completions", body, read_timeout_s=10))


def test_sdk_raises_the_inband_error(server: ServerHandle) -> None:
    with pytest.raises(openai.APIError, match="injected error"):
        _sdk_stream(server, _lab(error_after_tokens=AFTER, error_mode="inband"))


@pytest.mark.parametrize("mode", ["silent-close", "fake-done"])
def test_sdk_cannot_tell_a_silent_failure(server: ServerHandle, mode: str) -> None:
    """The broken modes: the SDK ends the iteration normally, with half an answer."""
    text, finish = _sdk_stream(server, _lab(error_after_tokens=AFTER, error_mode=mode))
    assert text and len(text) < len(SCRIPT)
    assert finish == ("stop" if mode == "fake-done" else None)


def test_sdk_raises_on_a_crash(server: ServerHandle) -> None:
    """A crash mid-body (no final chunk): httpx sees an incomplete chunked read."""
    with pytest.raises(openai.APIConnectionError):
        _sdk_stream(server, _lab(abort_after_tokens=AFTER))


@pytest.mark.parametrize(("mode", "outcome"), [
    ("inband", "error-in-band"), ("silent-close", "truncated"), ("fake-done", "complete")])
def test_measuring_client_outcome_per_error_mode(server: ServerHandle, mode: str, outcome: str) -> None:
    result = _measure(server.url, _lab(error_after_tokens=AFTER, error_mode=mode))
    assert result.outcome == outcome, result.error
    assert result.content_events == AFTER
    if mode == "inband":
        assert result.saw_done and result.error and "injected error" in result.error


@pytest.mark.parametrize("path", [(), ("nginx",), ("haproxy",), ("envoy",)],
                         ids=["direct", "nginx", "haproxy", "envoy"])
def test_crash_is_reported_truncated(lab: Lab, server: ServerHandle, path: tuple[str, ...]) -> None:
    """abort_after_tokens, direct and behind each proxy's production settings (proxies/fixed/)."""
    with lab.path(path, Variant(), server.port, base="fixed") as hops:
        entry = hops[0].url if hops else server.url
        result = _measure(entry, _lab(abort_after_tokens=AFTER))
    assert result.status == 200
    assert result.outcome == "truncated", f"{result.outcome}: {result.error}"
    assert not result.saw_done and not result.body_complete
    assert result.content_events == AFTER
