"""Request bodies against the fixed Varnish, Caddy and Traefik configs (issue 26, items 1 and 2),
behind an upstream with no body limit of its own (tests/reliability/counting_upstream.py), so
the proxy, not the server, is what stops a body. What a proxy cannot do is asserted as measured,
so a change in the program shows.

- A slow upload (headers at once with a Content-Length, the body a byte at a time): Caddy closes
  it at read_body (60 s, scaled to 2 s) and, buffering it, never dials the server while it
  trickles; Varnish reads it whole before its backend fetch (cache_req_body), so it holds no
  backend connection, but nothing in Varnish 7.1 bounds the whole body: the trickle stays open.
  Traefik's readTimeout closes it, an upstream connection held meanwhile
  (test_traefik_hostile.py).
- A body over MAX_BODY: Caddy answers 413 (OpenAI-shaped) from the Content-Length before
  forwarding, and a chunked one at the limit, the server having seen no end of it; Varnish
  answers 413 from the Content-Length and cuts a chunked one at the limit, nothing forwarded;
  Traefik forwards both whole (its only body limit, the buffering middleware, holds every
  response whole).
"""
from __future__ import annotations

import select
import socket
import time
from typing import Any, Iterator

import httpx
import pytest

from proxies import variant
from proxies.base import ProxyName
from proxies.fixed_settings import MAX_BODY
from proxies.runtime.local import run_proxy
from server.processes import wait_until
from tests.reliability.counting_upstream import CountingUpstream, counting_upstream
from tests.reliability.proxy_faults import (BODY_TIMEOUT_S, LATE_S, assert_openai_error, connect,
                                            connections_to, fixed_proxy)
from tests.runtimes import on_free_ports

pytestmark = pytest.mark.slow
UPLOAD_BYTES = 100_000
CLIENTS = 5
EVERY_S = 0.1  # a byte per client per 0.1 s: 100,000 bytes would take almost 3 hours
TOO_LARGE = MAX_BODY + 1024 * 1024
WATCH_S = BODY_TIMEOUT_S + 2 * LATE_S  # how long the trickles are watched


@pytest.fixture
def upstream() -> Iterator[CountingUpstream]:
    with counting_upstream() as counting:
        yield counting


def _start_uploads(proxy: Any, clients: int = CLIENTS) -> list[socket.socket]:
    socks = []
    for _ in range(clients):
        sock = connect(proxy)
        sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {proxy.settings.listen_host}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {UPLOAD_BYTES}\r\n\r\n{{".encode())
        socks.append(sock)
    return socks


def _trickle(socks: list[socket.socket], upstream_port: int, watch_s: float) -> tuple[list[float | None], int]:
    """Send each socket a body byte every EVERY_S for `watch_s`; returns when each was closed
    (None: still open) and the most upstream connections seen open meanwhile."""
    started = time.monotonic()
    closed: list[float | None] = [None] * len(socks)
    most = 0
    while (elapsed := time.monotonic() - started) < watch_s:
        most = max(most, connections_to(upstream_port))
        for i, sock in enumerate(socks):
            if closed[i] is not None:
                continue
            readable, _, _ = select.select([sock], [], [], 0)
            try:
                if readable and sock.recv(65536) == b"":
                    closed[i] = elapsed
                else:
                    sock.sendall(b"x")
            except OSError:
                closed[i] = elapsed
        time.sleep(EVERY_S)
    return closed, most


def test_caddy_closes_a_slow_upload_at_read_body_and_never_dials_meanwhile(upstream: CountingUpstream) -> None:
    with fixed_proxy("caddy", upstream.port) as proxy:
        socks = _start_uploads(proxy)
        closed, most = _trickle(socks, upstream.port, WATCH_S)
        for sock in socks:
            sock.close()
    assert most == 0, f"{most} upstream connections held while the uploads trickled"
    assert all(t is not None and BODY_TIMEOUT_S * 0.9 <= t <= BODY_TIMEOUT_S + LATE_S for t in closed), closed
    # Measured (Caddy 2.6.2): once read_body cuts it, buffer_requests still sends the bytes it
    # had on, under the client's Content-Length; the server never sees the body completed.
    assert all(received < UPLOAD_BYTES for received in upstream.bodies), upstream.bodies
    assert not any(upstream.complete), upstream.complete


def test_varnish_holds_no_backend_connection_for_a_slow_upload_but_keeps_it_open(upstream: CountingUpstream) -> None:
    with fixed_proxy("varnish", upstream.port) as proxy:
        socks = _start_uploads(proxy)
        closed, most = _trickle(socks, upstream.port, WATCH_S)
        for sock in socks:
            sock.close()
    assert most == 0, f"{most} backend connections held while the uploads trickled"
    # Nothing in Varnish 7.1 bounds a whole body: the trickles are still open.
    assert closed == [None] * CLIENTS, closed
    assert upstream.bodies == [], upstream.bodies


@pytest.mark.parametrize("proxy_name", ["varnish", "caddy"])
def test_the_bare_defaults_hold_an_upstream_connection_for_a_slow_upload(
        proxy_name: ProxyName, upstream: CountingUpstream) -> None:
    """The other direction: the way the measure above would see a held upstream connection."""
    with run_proxy(on_free_ports(variant(proxy_name, "defaults"), upstream.port)) as proxy:
        socks = _start_uploads(proxy, clients=2)
        wait_until(lambda: connections_to(upstream.port) >= 2, 5 + LATE_S, interval_s=0.05,
                   describe="the uploads forwarded while they trickle")
        closed, _ = _trickle(socks, upstream.port, 1.0)
        for sock in socks:
            sock.close()
    assert closed == [None, None], closed


def _post_too_large(proxy: Any, chunked: bool) -> httpx.Response | Exception:
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "' + b"x" * TOO_LARGE + b'"}]}'
    content: Any = (body[i:i + 65536] for i in range(0, len(body), 65536)) if chunked else body
    try:
        return httpx.post(proxy.url + "/v1/chat/completions", content=content, timeout=30,
                          headers={"content-type": "application/json"})
    except httpx.TransportError as exc:  # the connection cut at the limit
        return exc


def _settled(upstream: CountingUpstream, requests: int) -> None:
    """The upstream has finished counting `requests` requests (it counts one when it ends)."""
    wait_until(lambda: len(upstream.bodies) >= requests and upstream.open_connections == 0,
               5 + LATE_S, interval_s=0.05, describe=f"{requests} requests counted upstream")


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_caddy_refuses_a_too_large_body_with_a_json_413(chunked: bool, upstream: CountingUpstream) -> None:
    with fixed_proxy("caddy", upstream.port) as proxy:
        response = _post_too_large(proxy, chunked)
    assert isinstance(response, httpx.Response), response
    assert_openai_error(response, 413, "request_too_large")
    if chunked:  # counted while forwarded: the server saw at most the limit, and no end of it
        _settled(upstream, 1)
        assert upstream.bodies[0] <= MAX_BODY and upstream.complete == [False], upstream
    else:  # judged by the Content-Length: nothing forwarded
        assert upstream.bodies == [], upstream.bodies


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_varnish_never_forwards_a_too_large_body(chunked: bool, upstream: CountingUpstream) -> None:
    with fixed_proxy("varnish", upstream.port) as proxy:
        response = _post_too_large(proxy, chunked)
    if chunked:  # measured: cache_req_body stops at the limit and the connection closes unanswered
        assert isinstance(response, Exception) or response.status_code >= 400, response
    else:
        assert isinstance(response, httpx.Response), response
        assert_openai_error(response, 413, "request_too_large")
    assert upstream.bodies == [], upstream.bodies


def test_varnish_without_cache_req_body_forwards_a_chunked_body_whole(upstream: CountingUpstream) -> None:
    """The other direction: Varnish before this fix (the Content-Length check alone)."""
    with fixed_proxy("varnish", upstream.port, cache_req_body=False) as proxy:
        response = _post_too_large(proxy, chunked=True)
    assert isinstance(response, httpx.Response) and response.status_code == 200, response
    _settled(upstream, 1)
    assert upstream.bodies[0] > TOO_LARGE and upstream.complete == [True], upstream


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_traefik_forwards_a_too_large_body_whole(chunked: bool, upstream: CountingUpstream) -> None:
    """Measured: Traefik has no body limit that leaves responses alone (its buffering middleware
    holds every response whole, maxResponseBodyBytes 0 included); the server's own limit
    (--max-body-bytes) is what answers 413 behind it."""
    with fixed_proxy("traefik", upstream.port) as proxy:
        response = _post_too_large(proxy, chunked)
    assert isinstance(response, httpx.Response) and response.status_code == 200, response
    _settled(upstream, 1)
    assert upstream.bodies[0] > TOO_LARGE and upstream.complete == [True], upstream
