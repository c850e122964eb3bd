"""Request bodies against the fixed nginx, HAProxy and Apache configs (issue 26, items 1 and 2),
measured against an upstream with NO body limit of its own (it counts the body bytes it gets),
so the proxy, not the server, is what stops a body:

- a slow upload (the headers at once with `Content-Length: 100000`, then the body byte by byte)
  is closed at the whole-body deadline by HAProxy (`http-request wait-for-body`, an empty 408)
  and Apache (`RequestReadTimeout body=`, a JSON 408), 60 s in the fixed configs, scaled to 2 s
  here, and never holds an upstream connection; nginx bounds only a pause in a body, so its
  uploads stay open (asserted as measured), hold no upstream connection (it reads the body
  first), and a client address is refused (429, JSON) beyond `limit_conn_per_client`;
- a body over MAX_BODY never reaches the upstream: 413 from the Content-Length (all three), and
  chunked, 413 from nginx (it counts the body) or 411 from HAProxy and Apache, which cannot count
  a chunked body they forward (without the rule, measured, it reaches the upstream whole).
"""
from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from typing import Any, Iterator

import httpx
import pytest

from proxies.base import ProxyName
from proxies.fixed_settings import MAX_BODY
from server.processes import free_port, wait_until
from tests.reliability.proxy_faults import (BODY_TIMEOUT_S, LATE_S, assert_openai_error, connect,
                                            connections_to, fixed_proxy)

pytestmark = pytest.mark.slow
UPLOAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: 100000\r\n\r\n")
UPLOADS = 20  # as in the measurement
TOO_LARGE = MAX_BODY + 1024 * 1024
CHAT = "/v1/chat/completions"
JSON = {"content-type": "application/json"}
SMALL = (b'{"model": ', b'"tiny"}')  # a small chunked body, in two chunks


class CountingUpstream:
    """An HTTP/1.1 upstream with no body limit: reads each body whole (Content-Length or chunked),
    counts its bytes, answers 200 with a small JSON body."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests = 0
        self.body_bytes = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._serve, daemon=True).start()
        assert self._ready.wait(5), "the counting upstream did not start"

    def _serve(self) -> None:
        async def main() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, limit=1 << 20)
            self._ready.set()
            async with server:
                await server.serve_forever()
        with contextlib.suppress(RuntimeError):  # close() stops the loop
            self._loop.run_until_complete(main())

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                self.requests += 1
                fields = dict(line.split(":", 1) for line in head.split("\r\n")[1:] if ":" in line)
                if "content-length" in fields:
                    left = int(fields["content-length"])
                    while left:
                        data = await reader.read(min(left, 65536))
                        if not data:
                            return
                        self.body_bytes += len(data)
                        left -= len(data)
                elif "chunked" in fields.get("transfer-encoding", ""):
                    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                        self.body_bytes += len(await reader.readexactly(size + 2)) - 2
                    await reader.readuntil(b"\r\n")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 11\r\n\r\n{\"ok\": 1}\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


@pytest.fixture()
def upstream() -> Iterator[CountingUpstream]:
    counting = CountingUpstream()
    yield counting
    counting.close()


def _uploads(proxy: Any, count: int) -> list[socket.socket]:
    """`count` uploads whose headers (and first body byte) are sent at once."""
    socks = [connect(proxy) for _ in range(count)]
    for sock in socks:
        sock.sendall(UPLOAD + b"x")
    return socks


def _trickle(socks: list[socket.socket], limit_s: float, every_s: float, upstream_port: int,
             before: int) -> tuple[dict[int, float], dict[int, bytes], int, int]:
    """Send each socket's body one byte per `every_s` until the proxy closes it or `limit_s` ends.
    Returns (index: seconds it stayed open), (index: what the proxy answered), the most upstream
    connections seen meanwhile (above `before`, the count before the uploads began), and the
    bytes sent in all."""
    started, closed, answers, most, sent = time.monotonic(), {}, {}, 0, 0
    while len(closed) < len(socks) and time.monotonic() - started < limit_s:
        open_now = [s for i, s in enumerate(socks) if i not in closed]
        readable, _, _ = select.select(open_now, [], [], every_s)
        for sock in readable:
            index = socks.index(sock)
            try:
                data = sock.recv(65536)
            except ConnectionError:
                data = b""
            if data:
                answers[index] = answers.get(index, b"") + data
            else:
                closed[index] = time.monotonic() - started
        for index, sock in enumerate(socks):
            if index not in closed:
                try:
                    sock.sendall(b"x")
                    sent += 1
                except OSError:
                    closed[index] = time.monotonic() - started
        most = max(most, connections_to(upstream_port) - before)
    return closed, answers, most, sent


@pytest.mark.parametrize("proxy_name", ["haproxy", "apache"])
def test_a_slow_upload_is_closed_at_the_body_deadline_and_never_reaches_the_upstream(
        proxy_name: ProxyName, upstream: CountingUpstream) -> None:
    with fixed_proxy(proxy_name, upstream.port) as proxy:
        before = connections_to(upstream.port)
        socks = _uploads(proxy, UPLOADS)
        # One byte per 0.2 s each: never a pause the per-read timeouts would see.
        closed, answers, most, sent = _trickle(socks, BODY_TIMEOUT_S + 10, 0.2, upstream.port, before)
        for sock in socks:
            sock.close()
    assert len(closed) == UPLOADS, f"{proxy_name} kept {UPLOADS - len(closed)} slow uploads open"
    assert all(BODY_TIMEOUT_S * 0.9 <= s <= BODY_TIMEOUT_S + LATE_S for s in closed.values()), closed
    assert sent >= UPLOADS * BODY_TIMEOUT_S * 0.9 / 0.2 * 0.5, sent  # the trickles really went on
    assert most == 0 and upstream.requests == 0 and upstream.body_bytes == 0, (most, upstream.requests)
    statuses = {answer.split(b"\r\n", 1)[0] for answer in answers.values()}
    if proxy_name == "apache":  # a JSON 408 to each
        assert len(answers) == UPLOADS and statuses == {b"HTTP/1.1 408 Request Timeout"}, statuses
        assert all(b'"code": "request_timeout"' in answer for answer in answers.values())
    else:  # HAProxy closes silently, as on its header timeout (errorfile 408 /dev/null)
        assert answers == {}, statuses


def test_without_wait_for_body_haproxy_forwards_a_slow_upload(upstream: CountingUpstream) -> None:
    """The converse: HAProxy's default forwards the body as it comes, one upstream connection per
    upload, past the deadline the fixed config sets."""
    with fixed_proxy("haproxy", upstream.port, timeout_body=None) as proxy:
        before = connections_to(upstream.port)
        socks = _uploads(proxy, 5)
        closed, _, most, _ = _trickle(socks, BODY_TIMEOUT_S + LATE_S + 1, 0.2, upstream.port, before)
        for sock in socks:
            sock.close()
    assert closed == {} and most == 5 and upstream.body_bytes > 0, (closed, most, upstream.body_bytes)


def test_nginx_keeps_a_slow_upload_open_but_holds_no_upstream_connection(upstream: CountingUpstream) -> None:
    """client_body_timeout bounds a pause, not the body (nginx has no whole-body deadline):
    a trickle outlives it several times over, while a silent upload is closed at it."""
    with fixed_proxy("nginx", upstream.port, client_body_timeout=BODY_TIMEOUT_S) as proxy:
        before = connections_to(upstream.port)
        trickling, silent = _uploads(proxy, 2)
        closed, answers, most, _ = _trickle([trickling], 2 * BODY_TIMEOUT_S + LATE_S, 0.2, upstream.port,
                                            before)
        silent.settimeout(LATE_S)
        answer = silent.recv(65536)  # nginx has closed it by now (a 408 it does not send)
        trickling.close()
        silent.close()
    assert closed == {} and answers == {}, "nginx closed a trickled upload"
    assert most == 0 and upstream.requests == 0, "nginx connected upstream before the body was in"
    assert answer == b"", answer[:300]


def test_nginx_refuses_uploads_beyond_the_per_client_limit(upstream: CountingUpstream) -> None:
    limit = 4
    with fixed_proxy("nginx", upstream.port, limit_conn_per_client=limit) as proxy:
        socks = _uploads(proxy, limit)
        through = 0  # probes that got through before nginx had counted every upload

        def refused() -> bool:
            nonlocal through
            probe = httpx.post(proxy.url + CHAT, json={"model": "tiny"}, timeout=10)
            through += probe.status_code == 200
            return probe.status_code == 429

        wait_until(refused, 5, interval_s=0.05, describe="a request beyond the limit refused")
        error = assert_openai_error(httpx.post(proxy.url + CHAT, json={"model": "tiny"}, timeout=10),
                                    429, "too_many_connections")
        closed, _, _, _ = _trickle(socks, 1.0, 0.2, upstream.port, 0)
        for sock in socks:
            sock.close()
        # Once the uploads are gone, the same address gets through again.
        wait_until(lambda: httpx.post(proxy.url + CHAT, json={"model": "tiny"}, timeout=10).status_code == 200,
                   5, interval_s=0.05, describe="a request through once the uploads closed")
    assert error["type"] == "invalid_request_error"
    assert closed == {}, "the uploads at the limit were still open"
    assert upstream.requests == through + 1, "an upload reached the upstream"  # the probes only


@pytest.mark.parametrize("proxy_name", ["nginx", "haproxy", "apache"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_never_reaches_the_upstream(
        proxy_name: ProxyName, framing: str, upstream: CountingUpstream) -> None:
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "' + b"x" * TOO_LARGE + b'"}]}'
    content: Any = body if framing == "content-length" else (
        body[start:start + 65536] for start in range(0, len(body), 65536))
    with fixed_proxy(proxy_name, upstream.port) as proxy:
        response = httpx.post(proxy.url + CHAT, content=content, headers=JSON, timeout=30)
        small = httpx.post(proxy.url + CHAT, content=iter(SMALL), headers=JSON,
                           timeout=30) if framing == "chunked" else None
    assert (response.request.headers.get("transfer-encoding") == "chunked") == (framing == "chunked")
    if framing == "chunked" and proxy_name != "nginx":
        assert_openai_error(response, 411, "length_required")
        assert small is not None  # the trade-off: any chunked body is refused, however small
        assert_openai_error(small, 411, "length_required")
        assert upstream.requests == 0
    else:
        assert_openai_error(response, 413, "request_too_large")
        if small is not None:  # nginx counts a chunked body: a small one goes through
            assert small.status_code == 200 and upstream.requests == 1
    assert upstream.body_bytes == (len(b"".join(SMALL)) if small is not None and small.status_code == 200 else 0)


@pytest.mark.parametrize("proxy_name", ["haproxy", "apache"])
def test_without_the_rule_a_chunked_body_over_the_limit_reaches_the_upstream_whole(
        proxy_name: ProxyName, upstream: CountingUpstream) -> None:
    body = b"x" * TOO_LARGE
    with fixed_proxy(proxy_name, upstream.port, refuse_chunked=False) as proxy:
        response = httpx.post(proxy.url + CHAT, headers=JSON, timeout=30,
                              content=(body[start:start + 65536] for start in range(0, len(body), 65536)))
    assert response.status_code == 200 and upstream.body_bytes == TOO_LARGE, (response.status_code, upstream.body_bytes)
