"""The Anthropic SDK as a measured client (labs/client/anthropic_sdk.py), against canned Messages
streams: the whole stream with its pings counted, the same events without their `event:` lines
(a relay that forwards only `data:` lines), and a refusal."""
from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from labs.client import libraries as libclients

BODY = {"model": "tiny", "stream": True, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}],
        "lab": {"script": "Hi there."}}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "tiny",
           "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 0}}
EVENTS = [
    ("message_start", {"type": "message_start", "message": MESSAGE}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("ping", {"type": "ping"}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there."}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                       "usage": {"output_tokens": 2}}),
    ("message_stop", {"type": "message_stop"}),
]


def framed(named: bool) -> bytes:
    text = ": ping\n\n"
    for name, data in EVENTS:
        text += (f"event: {name}\n" if named else "") + f"data: {json.dumps(data)}\n\n"
    return text.encode()


class Messages(BaseHTTPRequestHandler):
    """/v1/messages: the stream, named or not by the query; /refused/v1/messages: a 529."""

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert asked["lab"] == BODY["lab"] and asked["stream"] is True  # extra fields travel
        if self.path.startswith("/refused/"):
            self.send_response(529)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(framed(named=not self.path.startswith("/nameless/")))

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def messages_url() -> Iterator[str]:
    with ThreadingHTTPServer(("127.0.0.1", 0), Messages) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()


def test_the_sdk_reads_every_event_and_the_wire_counts_the_pings(messages_url: str) -> None:
    result = libclients.measure_sync("anthropic", messages_url + "/v1/messages", BODY)
    assert result.outcome == "complete" and result.status == 200, result.error
    assert result.text == "Hi there." and result.content_events == 2 and result.finish_reason == "end_turn"
    assert result.heartbeats == 2  # the `: ping` comment and the `ping` event, which the SDK skips


def test_nameless_events_are_skipped_by_the_sdk_without_an_error(messages_url: str) -> None:
    """What a relay that drops `event:` lines does to the SDK: it skips every event that has no
    name (anthropic/_streaming.py: `if sse.event is None: continue`), raises nothing, and the
    app gets an empty answer from a 200."""
    result = libclients.measure_sync("anthropic", messages_url + "/nameless/v1/messages", BODY)
    assert result.status == 200 and result.error is None
    assert result.text == "" and result.events == [] and result.outcome == "truncated"
    assert result.body_bytes > 0  # the bytes came: only the SDK dropped them


def test_a_refusal_is_its_status(messages_url: str) -> None:
    result = libclients.measure_sync("anthropic", messages_url + "/refused/v1/messages", BODY)
    assert result.outcome == "http-error" and result.status == 529
    assert "OverloadedError" in (result.error or "") or "529" in (result.error or "")


def test_a_library_runs_only_on_the_protocol_it_speaks() -> None:
    from labs.scenario.model import Workload
    from labs.scenario.runner import drive

    assert libclients.library_api("anthropic") == "messages" and libclients.library_api("openai") == "chat"
    with pytest.raises(ValueError, match="'anthropic' measures messages streams only, not chat"):
        asyncio.run(drive("http://127.0.0.1:9/v1/chat/completions", dict(BODY), Workload(),
                          {"library": "anthropic", "api": "chat"}))
