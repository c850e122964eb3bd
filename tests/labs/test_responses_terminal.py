"""`responses-terminal-event` as each reader meets it, against the lab's server directly.

A Responses stream ends on its terminal event and has no `[DONE]`. The measuring client reading it
as Responses reports `response.failed` when it arrives, whether or not the connection then closes;
a reader with chat's habit (`delta.content`, waiting for `[DONE]`) finds no token and no end in a
whole Responses stream, and on a failed one held open it waits for its timeout and never learns
of the failure: the error is lost (openai/codex#43140).
"""
from __future__ import annotations

import asyncio
from typing import Any

from labs import client
from labs.client.apis import client_api
from labs.lab.server import served_model
from server.apis.table import CHAT, RESPONSES
from server.launcher import ServerHandle

SCRIPT = "Every token should reach the reader the moment the model makes it."
FAILED_AFTER = 5
IDLE_S = 1.0  # the reader's idle bound


def _read(server: ServerHandle, reader: str, **knobs: Any) -> client.StreamResult:
    """One Responses stream, read as the `reader` protocol reads its events."""
    body = client_api(RESPONSES.name).body(served_model(server.url), "Say something.", 256,
                                           {"script": SCRIPT, "tokens_per_s": 50.0, **knobs})
    return asyncio.run(client.measure_stream(server.url + RESPONSES.path, body, api=reader,
                                             read_timeout_s=IDLE_S))


def _failure_at(result: client.StreamResult) -> float | None:
    return next((event.t for event in result.events if event.kind == "error"), None)


def test_the_failure_is_reported_when_it_arrives_held_open_or_not(synthetic_server: ServerHandle) -> None:
    held = _read(synthetic_server, RESPONSES.name, error_after_tokens=FAILED_AFTER, error_mode="hold-open")
    closed = _read(synthetic_server, RESPONSES.name, error_after_tokens=FAILED_AFTER, error_mode="inband")
    for result in (held, closed):
        assert result.outcome == "error-in-band" and result.content_events == FAILED_AFTER
        assert _failure_at(result) is not None and not result.saw_done
    assert held.end_s - _failure_at(held) >= 0.9 * IDLE_S  # open until the reader's bound
    assert closed.end_s - _failure_at(closed) < 0.5 * IDLE_S  # closed with the failure event


def test_a_chat_reader_finds_no_token_and_no_end(synthetic_server: ServerHandle) -> None:
    whole = _read(synthetic_server, CHAT.name)
    assert whole.status == 200 and whole.events, "the Responses stream arrived"
    assert whole.outcome == "truncated" and whole.content_events == 0 and not whole.saw_done
    assert _read(synthetic_server, RESPONSES.name).outcome == "complete"  # the same stream, read right


def test_a_chat_reader_loses_the_failure_held_open(synthetic_server: ServerHandle) -> None:
    result = _read(synthetic_server, CHAT.name, error_after_tokens=FAILED_AFTER, error_mode="hold-open")
    assert result.status == 200 and result.events
    assert result.content_events == 0
    assert result.outcome == "timeout" and (result.error or "").startswith("read timeout")  # not the failure
