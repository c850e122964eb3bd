"""The `lab` object from the `X-Streamlab-Lab` header (server/apis/lab.py), for clients that set
headers but no body fields (Codex CLI's `http_headers`): taken, merged under the body's `lab`,
validated and guarded as the body's field is, on chat, responses and messages, through the fast
lane and the ASGI routes (a request with `X-Request-Id` goes the ASGI way).

The guard's beyond-loopback cases run in-process (the app built for `--host 0.0.0.0`, httpx's ASGI
transport), as tests/reliability/test_lab_access.py does: nothing binds beyond 127.0.0.1.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from server.apis.lab import LAB_HEADER
from server.apis.table import APIS
from server.config import ServerConfig
from server.engine import EngineConfig, create_engine
from server.http.app import create_app, wrap_middleware
from server.launcher import ServerHandle

SCRIPT = "Header knobs reach the engine."
PROMPT = [{"role": "user", "content": "hi"}]
# Each protocol's smallest streamed body, and its text deltas (the lab's own parser is tested
# elsewhere; here the text is all that matters).
BODIES: dict[str, dict[str, Any]] = {
    "chat": {"model": "tiny", "messages": PROMPT, "max_tokens": 64, "stream": True},
    "responses": {"model": "tiny", "input": PROMPT, "max_output_tokens": 64, "stream": True},
    "messages": {"model": "tiny", "messages": PROMPT, "max_tokens": 64, "stream": True},
}
HEADERS = {"anthropic-version": "2023-06-01"}
ROUTES = [pytest.param(name, id=name) for name in BODIES]
assert set(BODIES) == set(APIS)


def streamed_text(api: str, raw: str) -> str:
    text = []
    for line in raw.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if api == "chat":
            text += [c["delta"].get("content") or "" for c in event.get("choices", [])]
        elif api == "responses" and event.get("type") == "response.output_text.delta":
            text.append(event["delta"])
        elif api == "messages" and event.get("type") == "content_block_delta":
            text.append(event["delta"].get("text", ""))
    return "".join(text)


def post(server: ServerHandle, api: str, lab_header: Any = None, body_lab: Any = None,
         request_id: str | None = None) -> httpx.Response:
    headers = dict(HEADERS)
    if lab_header is not None:
        headers[LAB_HEADER] = lab_header if isinstance(lab_header, str) else json.dumps(lab_header)
    if request_id is not None:
        headers["X-Request-Id"] = request_id
    body = {**BODIES[api], **({"lab": body_lab} if body_lab is not None else {})}
    return httpx.post(server.url + APIS[api].path, json=body, headers=headers, timeout=10)


def error_text(response: httpx.Response) -> str:
    return response.json()["error"]["message"]


@pytest.mark.parametrize("api", ROUTES)
@pytest.mark.parametrize("request_id", [None, "lab-header-asgi"], ids=["lane", "asgi"])
def test_the_header_sets_the_knobs(server: ServerHandle, api: str, request_id: str | None) -> None:
    without = post(server, api, request_id=request_id)
    got = post(server, api, {"script": SCRIPT}, request_id=request_id)
    assert without.status_code == got.status_code == 200
    assert streamed_text(api, without.text) != SCRIPT  # the precondition: the script is the header's
    assert streamed_text(api, got.text) == SCRIPT


@pytest.mark.parametrize("api", ROUTES)
def test_the_body_wins_over_the_header_knob_by_knob(server: ServerHandle, api: str) -> None:
    got = post(server, api, {"script": "from the header", "hello": True},
               body_lab={"script": SCRIPT})
    assert got.status_code == 200
    assert streamed_text(api, got.text) == SCRIPT
    assert got.text.startswith(": ok")  # the header's other knob (`hello`) stays


@pytest.mark.parametrize("api", ROUTES)
@pytest.mark.parametrize(("header", "named"), [
    pytest.param("{not json", "not valid JSON", id="bad-json"),
    pytest.param({"scirpt": SCRIPT}, "scirpt", id="unknown-knob"),
    pytest.param({"tokens_per_s": -1}, "tokens_per_s", id="out-of-range"),
    pytest.param([SCRIPT], "object", id="not-an-object"),
])
def test_a_bad_header_is_a_400_naming_it(server: ServerHandle, api: str, header: Any, named: str) -> None:
    got = post(server, api, header)
    assert got.status_code == 400, got.text
    assert LAB_HEADER in error_text(got) and named in error_text(got)
    if api != "messages":  # Anthropic's error object has no param
        assert got.json()["error"]["param"].startswith(LAB_HEADER)


def exchange(tokenizer: Any, config: ServerConfig, api: str,
             headers: list[dict[str, str]]) -> list[httpx.Response]:
    """One request per entry of `headers` to the app built for `config` (in-process)."""
    async def run() -> list[httpx.Response]:
        engine = create_engine(EngineConfig(kind="synthetic", slots=2, max_queue=2), tokenizer)
        app = create_app(config, engine, tokenizer)
        transport = httpx.ASGITransport(app=wrap_middleware(app, config))
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return [await client.post(APIS[api].path, json={**BODIES[api], "stream": False},
                                          headers={**HEADERS, **extra}) for extra in headers]
    return asyncio.run(run())


LAB = {LAB_HEADER: json.dumps({"tokens_per_s": 1000})}


@pytest.mark.parametrize("api", ROUTES)
@pytest.mark.parametrize(("config", "sent", "statuses"), [
    # Beyond loopback without a token: refused as the body's field is; without it, served.
    pytest.param(ServerConfig(host="0.0.0.0"), [LAB, {}], [403, 200], id="beyond-loopback"),
    pytest.param(ServerConfig(host="127.0.0.1", lab_token="s3cret"),
                 [LAB, {**LAB, "X-Lab-Token": "wrong"}, {**LAB, "X-Lab-Token": "s3cret"}],
                 [403, 403, 200], id="token"),
    pytest.param(ServerConfig(host="127.0.0.1", lab_enabled=False), [LAB, {}], [400, 200],
                 id="no-lab"),
    pytest.param(ServerConfig(host="127.0.0.1"), [LAB], [200], id="loopback"),
])
def test_the_header_passes_the_lab_guard(tokenizer: Any, api: str, config: ServerConfig,
                                         sent: list[dict[str, str]], statuses: list[int]) -> None:
    got = exchange(tokenizer, config, api, sent)
    assert [r.status_code for r in got] == statuses
    for response in got:
        if response.status_code >= 400:
            assert LAB_HEADER in error_text(response)
