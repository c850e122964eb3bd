"""Fixtures for the reliability suite: a server with default limits scaled small, raw HTTP, and
the check every case ends with (the server still streams, and its gauges are back at 0).

The server runs the transformers engine on the tiny model, so hostile sampling parameters reach
a real sampler. Its HTTP limits are the defaults scaled down by flags (seconds, not minutes),
so that the slow-client tests take seconds.
"""
from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from server.launcher import ServerHandle, running_server
from server.processes import wait_until

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
SEND_TIMEOUT_S = 1.0
KEEP_ALIVE_S = 1.0
SERVER_ARGS = ["--slots", "4", "--max-queue", "8", "--header-timeout-s", str(HEADER_TIMEOUT_S),
               "--body-timeout-s", str(BODY_TIMEOUT_S), "--send-timeout-s", str(SEND_TIMEOUT_S),
               "--keep-alive-s", str(KEEP_ALIVE_S)]

GAUGES = ("streamlab_active_streams", "streamlab_slots_in_use", "streamlab_queued_requests")


@pytest.fixture(scope="session")
def hardened(model_dir: str) -> Iterator[ServerHandle]:
    with running_server(SERVER_ARGS) as handle:
        yield handle


@pytest.fixture(scope="session")
def proxy_upstream() -> Iterator[ServerHandle]:
    """The synthetic server behind the fixed proxies (test_proxies_faults, test_proxies_hostile),
    one for the session: those tests only stream through it and wait until its slots are free
    again; a test that kills or stops a server starts its own."""
    from tests.reliability.proxy_faults import running_server as proxy_faults_server

    with proxy_faults_server() as handle:
        yield handle


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def post(server: ServerHandle, body: bytes, headers: dict[str, str | None] | None = None,
         path: str = "/v1/chat/completions", timeout_s: float = 30.0,
         announce_only: bool = False) -> Reply:
    """One POST on a fresh connection; the whole reply. `announce_only`: send the headers
    (Content-Length included) but not the body, as for a body the server refuses unread."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout_s)
    try:
        sent = {"content-type": "application/json",
                **{name.lower(): value for name, value in (headers or {}).items()}}
        if announce_only:
            conn.putrequest("POST", path)
            for name, value in {**sent, "content-length": str(len(body))}.items():
                if value is not None:
                    conn.putheader(name, value)
            conn.endheaders()
        else:
            conn.request("POST", path, body=body,
                         headers={k: v for k, v in sent.items() if v is not None})
        response = conn.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()},
                     response.read())
    finally:
        conn.close()


def stream_once(server: ServerHandle, max_tokens: int = 4) -> bytes:
    """A good streaming request, read to its end: the proof that the server still streams."""
    body = json.dumps({"model": "tiny", "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "still there?"}]}).encode()
    reply = post(server, body)
    assert reply.status == 200, (reply.body[:300], server.log_tail(30))
    assert reply.body.rstrip().endswith(b"data: [DONE]"), reply.body[-300:]
    assert b'"content":"' in reply.body
    return reply.body


def gauges_at_zero(server: ServerHandle, timeout_s: float = 10.0) -> None:
    """Every stream, slot and queue entry given back (polled: the engine frees within a step)."""
    def zero() -> bool:
        samples = server.metrics()
        return all(samples.get(name, 0.0) == 0.0 for name in GAUGES)
    try:
        wait_until(zero, timeout_s, interval_s=0.02, describe="active streams, slots and queue at 0")
    except TimeoutError as exc:
        samples = server.metrics()
        left = {name: samples.get(name) for name in GAUGES}
        raise AssertionError(f"{exc}: {left}\n{server.log_tail(30)}") from None


def assert_server_fine(server: ServerHandle) -> None:
    """The check every hostile case ends with."""
    server.process.check_alive()
    stream_once(server)
    gauges_at_zero(server)


def open_and_leave(server: ServerHandle, body: bytes, linger_s: float = 0.3) -> bytes:
    """Send a request, read what arrives within `linger_s` (pacing: the client's patience),
    then leave."""
    sock = socket.create_connection((server.host, server.port), timeout=5)
    try:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + body)
        sock.settimeout(linger_s)
        seen = b""
        deadline = time.monotonic() + linger_s
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            seen += data
        return seen
    finally:
        sock.close()


def status_of(raw: bytes) -> int | None:
    if not raw.startswith(b"HTTP/1.1 "):
        return None
    return int(raw[9:12])
