"""The Starlette relay (proxies/apps/starlette): each forwarding mode, on exact bytes from a fixed
upstream and on the lab server's paced chat stream (the heartbeats a `first_token_delay_s` makes)."""
from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import httpx
import pytest
from pydantic import ValidationError

from labs.client import measure_stream
from proxies.apps.starlette.modes import MODES
from proxies.apps.starlette.settings import StarletteSettings
from proxies.runtime import get_runtime
from server.apis.table import APIS
from server.launcher import ServerHandle
from server.processes import free_port
from tests.proxies.test_apps import body_for

# An Anthropic-shaped stream with every kind of line a relay may mishandle: named events, an id,
# a comment heartbeat and a named ping event.
NAMED_EVENTS = (
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    b": ping\n\n"
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'id: 7\nevent: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"\xe6\x9d\xb1"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def lines_of(payload: bytes) -> list[bytes]:
    return payload.split(b"\n")[:-1]


EXPECTED: dict[str, bytes] = {
    "lines": NAMED_EVENTS,
    "iter-raw": NAMED_EVENTS,
    "data-only": b"".join(line + b"\n" for line in lines_of(NAMED_EVENTS)
                          if not line or line.startswith(b"data:")),
    # The comment goes (its blank line stays: an empty event, which SSE parsers ignore), and the
    # ping event goes whole.
    "drop-pings": (b'event: message_start\ndata: {"type":"message_start"}\n\n' b"\n"
                   b'id: 7\nevent: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"\xe6\x9d\xb1"}}\n\n'
                   b'event: message_stop\ndata: {"type":"message_stop"}\n\n'),
}


REFUSAL = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}


class FixedStream(BaseHTTPRequestHandler):
    """Answers every request with NAMED_EVENTS (and says which path and method it was asked);
    /refused with a JSON error."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/refused":
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(REFUSAL).encode())
            return
        self.send_response(200 if self.command == "GET" else 201)  # GET: the runtime's readiness
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("X-Asked", f"{self.command} {self.path}")
        self.end_headers()
        self.wfile.write(NAMED_EVENTS)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def fixed_upstream() -> Iterator[int]:
    with ThreadingHTTPServer(("127.0.0.1", 0), FixedStream) as upstream:
        thread = threading.Thread(target=upstream.serve_forever, daemon=True)
        thread.start()
        yield upstream.server_address[1]
        upstream.shutdown()


@pytest.fixture(scope="module")
def server(synthetic_server: ServerHandle) -> ServerHandle:
    return synthetic_server


def test_every_mode_says_what_it_does_and_where_it_was_seen() -> None:
    for mode in MODES.values():
        assert mode.does and mode.source.startswith("https://"), mode.name
    assert set(EXPECTED) == set(MODES), "a mode without its expected bytes here"
    with pytest.raises(ValidationError, match="known: lines"):
        StarletteSettings(mode="iter_raw")


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_forwards_what_it_says(fixed_upstream: int, mode: str) -> None:
    settings = StarletteSettings(listen_port=free_port(), upstream_port=fixed_upstream, mode=mode)
    with get_runtime("local").run_app(settings) as running:
        # Any method and path: the relay is protocol-blind, the status and headers pass through.
        response = httpx.put(running.url + "/v1/messages?beta=true", content=b"{}", timeout=10)
        answer = httpx.post(running.url + "/refused", content=b"{}", timeout=10)
    assert response.status_code == 201 and response.headers["x-asked"] == "PUT /v1/messages?beta=true"
    assert response.content == EXPECTED[mode]
    # A body that is not an event stream (an error's JSON) passes whole, whatever the mode.
    assert json.loads(answer.content) == REFUSAL and answer.status_code == 400


def stream_through(server: ServerHandle, settings: StarletteSettings, **lab: object):
    with get_runtime("local").run_app(settings.with_(listen_port=free_port(), upstream_port=server.port)) as running:
        body = body_for(server, **lab)
        return asyncio.run(measure_stream(running.url + "/v1/chat/completions", body, accept_encoding=None))


THINK_S = 1.0  # the silence before the first token
PING_S = 0.2  # the server's heartbeat during it
SILENCE = {"first_token_delay_s": THINK_S, "heartbeat_s": PING_S}


def test_lines_forwards_each_heartbeat_as_it_is_sent(server: ServerHandle) -> None:
    result = stream_through(server, StarletteSettings(mode="lines"), **SILENCE)
    assert result.outcome == "complete" and result.text == "Every token counts."
    pings = [e.t for e in result.events if e.kind == "comment"]
    # Four pings fit the silence; the first arrives one heartbeat in, long before the first token.
    assert len(pings) >= 3 and pings[0] < THINK_S / 2, pings


def test_iter_raw_holds_every_byte_until_its_chunk_fills(server: ServerHandle) -> None:
    """The whole answer (about 1.5 KB) is less than one 8192-byte chunk: nothing, not the role
    chunk nor a heartbeat, reaches the client before the body ends; the pings were sent all the same."""
    result = stream_through(server, StarletteSettings(mode="iter-raw"), **SILENCE)
    assert result.outcome == "complete" and result.text == "Every token counts."
    assert result.heartbeats >= 3  # the server pinged through the silence: they arrive, late
    first_byte = min(e.t for e in result.events)
    assert result.ttft_s is not None and first_byte >= THINK_S, (first_byte, result.ttft_s)
    # A chunk size of one byte makes the same iterator hand over what it reads.
    flowing = stream_through(server, StarletteSettings(mode="iter-raw", chunk_bytes=1), **SILENCE)
    assert min(e.t for e in flowing.events) < THINK_S / 2 and flowing.text == "Every token counts."


def _departures(server: ServerHandle) -> float:
    lines = httpx.get(server.url + "/metrics", timeout=10).text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines
               if line.startswith('streamlab_requests_aborted_total{reason="disconnect"}'))


@pytest.mark.parametrize("mode", ["lines", "iter-raw"])
def test_a_client_that_leaves_is_passed_on(server: ServerHandle, mode: str) -> None:
    """The relay closes its upstream request when its client leaves: the server hears it."""
    settings = StarletteSettings(mode=mode, chunk_bytes=64, listen_port=free_port(), upstream_port=server.port)
    before = _departures(server)
    with get_runtime("local").run_app(settings) as running:
        body = body_for(server, script="word " * 60, tokens_per_s=20)
        result = asyncio.run(measure_stream(running.url + "/v1/chat/completions", body, accept_encoding=None,
                                            disconnect_after_events=3))
        assert result.outcome == "disconnected"
        # 60 tokens at 20 tok/s: the answer would run 3 s more; the departure is heard within it.
        heard = asyncio.run(_heard(server, before))
    assert heard, "the server never heard the departure"


async def _heard(server: ServerHandle, before: float) -> bool:
    for _ in range(50):  # polled: up to 2.5 s, under the 3 s the answer had left
        if await asyncio.to_thread(_departures, server) > before:
            return True
        await asyncio.sleep(0.05)
    return False


# One streamed request per protocol of the server's table, and the line that ends its stream.
PROTOCOL_BODIES = {
    "chat": ({"messages": [{"role": "user", "content": "hi"}]}, "data: [DONE]"),
    "responses": ({"input": "hi"}, "event: response.completed"),
    "messages": ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}, "event: message_stop"),
}


@pytest.mark.parametrize("api", sorted(APIS))
def test_every_protocol_passes_and_data_only_strips_its_names(server: ServerHandle, api: str) -> None:
    fields, last = PROTOCOL_BODIES[api]
    body = {"model": body_for(server)["model"], "stream": True, **fields,
            "lab": {"script": "Every token counts.", "tokens_per_s": 50}}
    seen = {}
    for mode in ("lines", "data-only"):
        settings = StarletteSettings(mode=mode, listen_port=free_port(), upstream_port=server.port)
        with get_runtime("local").run_app(settings) as running:
            # Messages requires its version header (the SDK sends it); the others ignore it.
            seen[mode] = httpx.post(running.url + APIS[api].path, json=body, timeout=30,
                                    headers={"anthropic-version": "2023-06-01"}).text.splitlines()
    assert last in seen["lines"]  # the whole stream, to its terminal event
    named = [line for line in seen["lines"] if line.startswith("event:")]
    assert bool(named) == (api != "chat")  # chat's events have no names to lose
    assert not any(line.startswith("event:") for line in seen["data-only"])
    assert [line for line in seen["data-only"] if line.startswith("data:")] != []
