"""Slow and huge request bodies against every fixed config, locally and in containers, in front of
the fake upstream (labs.fakes), which sets no limit of its own and counts every connection,
request and body byte it receives: so what stops a body is the proxy, never the server.

- A slow upload (headers at once, `Content-Length: 100000`, then the body at 10 bytes/s on a few
  connections) is closed at the config's whole-body deadline (scaled to DEADLINE_S here), and
  holds no upstream connection while it trickles: the proxy waits for the body before it
  connects. While the uploads trickle, an ordinary stream still streams: its first event soon,
  one event per read.
- A body over the limit (MAX_BODY + 1 MiB), with a Content-Length and chunked, gets the proxy's
  own 413 in the OpenAI shape and never reaches the upstream.

What a proxy cannot do is declared in DEFENCES as measured, with the reason, so a change in the
program shows as a failure here.
"""
from __future__ import annotations

import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from labs.client.results import StreamResult
from labs.fakes.upstream import FakeUpstream
from proxies import variant
from proxies.base import ProxyName
from proxies.fixed_settings import MAX_BODY
from proxies.runtime.base import Runtime
from tests.reliability.proxy_faults import LATE_S, assert_openai_error, connections_to, fixed
from tests.runtimes import on_free_ports, stream

pytestmark = pytest.mark.slow
DEADLINE_S = 2.0  # the whole-body deadline, scaled from the exported 60 s
UPLOADS = 3  # slow uploads at once (bounded: loopback only, a few sockets)
UPLOAD_BYTES = 100_000  # at 10 bytes/s: hours, unless the deadline ends it
UPLOAD_HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % UPLOAD_BYTES)
TOO_LARGE = MAX_BODY + 1024 * 1024
# The ordinary stream measured while the uploads trickle: 20 events 50 ms apart, headers 50 ms
# in (as a model's: clear of Traefik's early cut of POST streams answered at once).
ORDINARY = "/v1/chat/completions?n=20&interval=0.05&headers_delay_s=0.05"
ORDINARY_BODY = b'{"model": "tiny", "stream": true, "messages": []}'


@dataclass(frozen=True)
class Defence:
    """What a fixed config does against slow and huge bodies (measured)."""

    deadline: str  # the setting that bounds a whole request body, scaled to DEADLINE_S here
    status: int | None  # what the proxy answers a slow upload at its deadline (None: it only closes)


DEFENCES: dict[ProxyName, Defence] = {
    # request_timeout: the whole request, body included; the buffer filter (max_request_bytes)
    # holds the body until it is complete, so the router connects only then.
    "envoy": Defence(deadline="request_timeout", status=408),
}
PROXIES = tuple(DEFENCES)


@dataclass
class Uploads:
    """The slow uploads' outcome: when each was closed, what the proxy answered, and what the
    upstream saw meanwhile."""

    closed_after_s: list[float | None]
    answers: list[bytes]
    upstream_connections: int  # new connections the upstream accepted during the trickle
    upstream_established_peak: int  # established connections to it, at most, during the trickle
    upstream_body_bytes: int  # body bytes it received during the trickle


def trickle(host: str, port: int, upstream: FakeUpstream, limit_s: float) -> Uploads:
    """UPLOADS connections send UPLOAD_HEAD and then one body byte each per 0.1 s until the proxy
    closes them or `limit_s` passes."""
    socks = [socket.create_connection((host, port), timeout=5) for _ in range(UPLOADS)]
    connections, body_bytes = upstream.stats.connections, upstream.stats.body_bytes
    closed: list[float | None] = [None] * UPLOADS
    answers = [b""] * UPLOADS
    peak = 0
    started = time.monotonic()
    try:
        for sock in socks:
            sock.sendall(UPLOAD_HEAD + b"{")
        while (elapsed := time.monotonic() - started) < limit_s and None in closed:
            peak = max(peak, connections_to(upstream.port))
            open_ones = [s for s, c in zip(socks, closed) if c is None]
            readable, _, _ = select.select(open_ones, [], [], 0.1)
            for index, sock in enumerate(socks):
                if closed[index] is not None:
                    continue
                try:
                    if sock in readable:
                        data = sock.recv(65536)
                        answers[index] += data
                        if not data:
                            closed[index] = elapsed
                            continue
                    sock.sendall(b" ")
                except (ConnectionResetError, BrokenPipeError):
                    closed[index] = elapsed
    finally:
        for sock in socks:
            sock.close()
    return Uploads(closed, answers, upstream.stats.connections - connections, peak,
                   upstream.stats.body_bytes - body_bytes)


def ordinary_stream_during(proxy_url: str) -> tuple[threading.Thread, list[StreamResult]]:
    results: list[StreamResult] = []
    thread = threading.Thread(target=lambda: results.append(stream(proxy_url + ORDINARY, ORDINARY_BODY)),
                              daemon=True)
    thread.start()
    return thread, results


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_a_slow_upload_is_closed_at_the_body_deadline_and_holds_no_upstream(
        proxy_name: ProxyName, runtime: Runtime, upstream: FakeUpstream) -> None:
    defence = DEFENCES[proxy_name]
    settings = fixed(proxy_name, upstream.port, **{defence.deadline: DEADLINE_S})
    with runtime.run_proxy(settings) as proxy:
        baseline = connections_to(upstream.port)
        thread, ordinary = ordinary_stream_during(proxy.url)
        uploads = trickle(settings.listen_host, settings.listen_port, upstream, DEADLINE_S + LATE_S + 2)
        thread.join(timeout=30)
    # Each upload closed at the deadline: not before (the trickle went on), not long after.
    assert all(c is not None and DEADLINE_S * 0.9 <= c <= DEADLINE_S + LATE_S for c in uploads.closed_after_s), \
        (uploads.closed_after_s, uploads.answers)
    for answer in uploads.answers:  # the proxy's own answer, in the OpenAI shape, or none
        if defence.status is None:
            assert answer == b"", answer[:300]
        else:
            assert answer.startswith(b"HTTP/1.1 %d " % defence.status) and b'"error":' in answer, answer[:300]
    # Nothing of the uploads reached the upstream: of the bytes it got, all were the ordinary stream's.
    assert uploads.upstream_body_bytes == len(ORDINARY_BODY), uploads
    # The ordinary stream used one upstream connection (or a pooled one): no more than that.
    assert uploads.upstream_established_peak <= baseline + 1, uploads
    [result] = ordinary
    assert result.status == 200 and result.outcome == "complete" and result.content_events == 20
    assert result.ttft_s is not None and result.ttft_s < 0.2 + 0.05, result.ttft_s
    assert result.bursts >= 17, result.content_reads  # a busy 2-core box may merge an odd pair


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_their_defaults_let_a_slow_upload_trickle_on(proxy_name: ProxyName, upstream: FakeUpstream) -> None:
    """The other direction: without the fixed config's deadline the same trickle is still open
    well past it, so the test above measures the setting, not an accident of the harness."""
    from proxies.runtime.local import run_proxy
    with run_proxy(on_free_ports(variant(proxy_name, "defaults"), upstream.port)) as proxy:
        uploads = trickle(proxy.settings.listen_host, proxy.settings.listen_port, upstream,
                          DEADLINE_S + LATE_S + 1)
    assert uploads.closed_after_s == [None] * UPLOADS, uploads


def _body() -> bytes:
    return b'{"model": "tiny", "stream": true, "messages": [{"role": "user", "content": "' + \
        b"x" * TOO_LARGE + b'"}]}'


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("proxy_name", PROXIES)
def test_a_body_over_the_limit_gets_a_json_413_and_never_reaches_the_upstream(
        proxy_name: ProxyName, framing: str, runtime: Runtime, upstream: FakeUpstream) -> None:
    body = _body()
    content: Any = body if framing == "content-length" else (
        body[start:start + 65536] for start in range(0, len(body), 65536))
    requests, body_bytes = upstream.stats.requests, upstream.stats.body_bytes
    with runtime.run_proxy(fixed(proxy_name, upstream.port)) as proxy:
        response = httpx.post(proxy.url + "/v1/chat/completions", content=content, timeout=30,
                              headers={"content-type": "application/json"})
    assert (response.request.headers.get("transfer-encoding") == "chunked") == (framing == "chunked")
    assert_openai_error(response, 413, "request_too_large")
    assert upstream.stats.requests == requests and upstream.stats.body_bytes == body_bytes, \
        (upstream.stats.requests - requests, upstream.stats.body_bytes - body_bytes)
