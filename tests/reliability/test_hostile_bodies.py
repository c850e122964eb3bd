"""Slow and huge request bodies against every fixed config, locally and in containers, in front of
the fake upstream (labs.fakes), which sets no limit of its own and counts every connection,
request and body byte it receives: so what stops a body is the proxy, never the server.

- A slow upload (headers at once, `Content-Length: 100000`, then the body at 10 bytes/s on a few
  connections) is closed at the config's whole-body deadline (60 s exported, BODY_TIMEOUT_S
  here), and holds no upstream connection while it trickles: the proxy waits for the body
  before it connects. While the uploads trickle, an ordinary stream still streams: its first
  event soon, one event per read.
- A body over the limit (MAX_BODY + 1 MiB), with a Content-Length and chunked, gets the proxy's
  own error in the OpenAI shape (413; 411 where the proxy cannot count a chunked body, so it
  refuses every one) and never reaches the upstream.
- After that attack, in front of the lab's own server (whose 413 is the limit where the proxy
  forwards a chunked body whole), the same proxy serves the next two ordinary streams whole.

What a proxy cannot do is declared in DEFENCES as measured, with the reason, so a change in the
program shows as a failure here; each bound is also shown to depend on the fixed config's
setting (without it, the same client gets through).
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
from proxies.base import ProxyName
from proxies.fixed_settings import MAX_BODY
from proxies.runtime.base import Runtime
from proxies.runtime.local import run_proxy
from server.processes import wait_until
from tests.reliability.proxy_faults import (BODY_TIMEOUT_S, HEADER_TIMEOUT_S, LATE_S, assert_openai_error,
                                            chat, connections_to, fixed, on_releases)
from tests.runtimes import stream

pytestmark = pytest.mark.slow
UPLOADS = 5  # slow uploads at once (bounded: loopback only, a few sockets)
UPLOAD_BYTES = 100_000  # at 10 bytes/s: hours, unless a deadline ends it
UPLOAD_HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % UPLOAD_BYTES)
TOO_LARGE = MAX_BODY + 1024 * 1024
SMALL_CHUNKED = (b'{"model": ', b'"tiny"}')  # a small chunked body, in two chunks
JSON = {"content-type": "application/json"}
# The ordinary stream measured while the uploads trickle: 20 events 50 ms apart, headers 50 ms
# in (as a model's: clear of Traefik's early cut of POST streams answered at once).
ORDINARY = "/v1/chat/completions?n=20&interval=0.05&headers_delay_s=0.05"
ORDINARY_BODY = b'{"model": "tiny", "stream": true, "messages": []}'
QUICK = "/v1/chat/completions?n=1&interval=0"  # one event: a request that passes through at once


@dataclass(frozen=True)
class Defence:
    """What a fixed config does against slow and huge bodies (measured)."""

    deadline: str | None  # the setting that bounds a whole body (None: the proxy has none)
    off: Any = None  # that setting's value that turns the bound off (the converse)
    scaled_s: float = BODY_TIMEOUT_S  # the deadline as these tests scale it (SCALED)
    answers: tuple[int | None, ...] = (None,)  # its answer to a slow upload at the deadline, as
    #                                            measured (None: it only closes; 408: JSON)
    holds_upstream: bool = False  # a trickling upload holds an upstream connection meanwhile
    forwards_cut_body: bool = False  # once cut, what it had buffered goes on (never completed)
    chunked: int | str = 413  # a chunked body over the limit: 413, 411 (every one refused),
    #                           "cut" (closed at the limit, unanswered), "forwarded" (whole)
    counts_while_forwarding: bool = False  # a chunked body goes on while counted, up to the limit
    sized: int | str = 413  # a body over the limit with a Content-Length: 413 or "forwarded"


DEFENCES: dict[ProxyName, Defence] = {
    # client_body_timeout bounds a pause, not the body: nginx has no whole-body deadline. It reads
    # the body before it connects, so a trickle holds no upstream; limit_conn bounds how many one
    # client address keeps open (test below). It counts a chunked body.
    "nginx": Defence(deadline=None),
    # http-request wait-for-body: no upstream until the body is in (up to its buffer), closed
    # silently at the deadline, as at its header timeout. It cannot count a chunked body: 411.
    "haproxy": Defence(deadline="timeout_body", chunked=411),
    # request_timeout: the whole request, body included, a JSON 408; the buffer filter holds the
    # body until it is complete (and counts a chunked one), so the router connects only then.
    "envoy": Defence(deadline="request_timeout", off="0s", answers=(408,)),
    # Nothing in Varnish 7.1 or 7.7 bounds a whole body (its per-read timeout_idle, 5 s, never trips at
    # 10 bytes/s); cache_req_body reads it whole before the backend fetch, so no backend
    # connection is held, and cuts a chunked one at the limit without an answer.
    "varnish": Defence(deadline=None, chunked="cut"),
    # RequestReadTimeout body= without a MinRate: a whole-body deadline, a JSON 408. mod_proxy
    # ignores LimitRequestBody for what it forwards: every chunked body gets 411.
    "apache": Defence(deadline="request_body_timeout", answers=(408,), chunked=411),
    # read_body bounds the whole request; buffer_requests (sized bodies only) dials the server
    # once the body is in, and may forward what it had once read_body cut it (seen once on
    # 2.6.2; 2026-12-06 neither 2.6.2 nor 2.11.4 sent anything, here or at 60 s), and the client
    # gets a 200 with an empty body (measured on both: a cut upload is never told it failed).
    # request_body counts a chunked body while it forwards it, and answers 413 at the limit.
    "caddy": Defence(deadline="read_body_timeout", answers=(200,), forwards_cut_body=True,
                     counts_while_forwarding=True),
    # readTimeout (scaled to the header timeout: it is that too) bounds the whole request, but
    # Traefik forwards a body as it comes, an upstream connection held; it has no body limit that
    # leaves responses alone (its buffering middleware holds them whole): the server's own 413.
    # At readTimeout it answers the forwarded request as its upstream side ends: a plain 504, its
    # 499 (client closed) or nothing, measured in one run.
    "traefik": Defence(deadline="read_timeout", off="0s", scaled_s=HEADER_TIMEOUT_S, holds_upstream=True,
                       answers=(None, 499, 504), chunked="forwarded", sized="forwarded"),
}
PROXIES = tuple(DEFENCES)
BOUNDED = tuple(name for name, defence in DEFENCES.items() if defence.deadline)
REFUSE_CHUNKED = tuple(name for name, defence in DEFENCES.items() if defence.chunked in (411, "cut"))
# The switch that turns each chunked rule off (the converse shows what the proxy does without it).
CHUNKED_RULE_OFF = {"haproxy": {"refuse_chunked": False}, "apache": {"refuse_chunked": False},
                    "varnish": {"cache_req_body": False}}


@dataclass
class Uploads:
    """The slow uploads' outcome, and what the upstream saw meanwhile."""

    closed_after_s: list[float | None]  # None: still open at the end
    answers: list[bytes]
    upstream_established_peak: int  # established connections to it, at most, above the baseline
    # Requests whose headers reached the upstream before the proxy closed any upload: an upload
    # forwarded while it trickles is one (the ordinary stream, started just before, may be too).
    upstream_heads_while_trickling: int


def trickle(host: str, port: int, upstream: FakeUpstream, limit_s: float, count: int = UPLOADS) -> Uploads:
    """`count` connections send UPLOAD_HEAD and then one body byte each per 0.1 s until the proxy
    closes them or `limit_s` passes."""
    baseline, heads = connections_to(upstream.port), upstream.stats.heads
    heads_while_trickling = 0
    socks = [socket.create_connection((host, port), timeout=5) for _ in range(count)]
    closed: list[float | None] = [None] * count
    answers = [b""] * count
    peak = 0
    started = time.monotonic()
    try:
        for sock in socks:
            sock.sendall(UPLOAD_HEAD + b"{")
        while (elapsed := time.monotonic() - started) < limit_s and None in closed:
            peak = max(peak, connections_to(upstream.port) - baseline)
            if all(c is None for c in closed):
                heads_while_trickling = upstream.stats.heads - heads
            readable, _, _ = select.select([s for s, c in zip(socks, closed) if c is None], [], [], 0.1)
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
    return Uploads(closed, answers, peak, heads_while_trickling)


def ordinary_stream_during(proxy_url: str) -> tuple[threading.Thread, list[StreamResult]]:
    results: list[StreamResult] = []
    thread = threading.Thread(target=lambda: results.append(stream(proxy_url + ORDINARY, ORDINARY_BODY)),
                              daemon=True)
    thread.start()
    return thread, results


@pytest.mark.parametrize("proxy_name", on_releases(PROXIES))
def test_a_slow_upload_is_closed_at_the_body_deadline_and_holds_no_upstream(
        proxy_name: ProxyName, runtime: Runtime, upstream: FakeUpstream) -> None:
    defence = DEFENCES[proxy_name]
    settings = fixed(proxy_name, upstream.port)
    deadline_s = defence.scaled_s
    # A proxy with no deadline is watched for twice the others' (asserted as measured: still open).
    window_s = deadline_s + LATE_S + 1 if defence.deadline else 2 * BODY_TIMEOUT_S + LATE_S
    requests, body_bytes = upstream.stats.requests, upstream.stats.body_bytes
    with runtime.run_proxy(settings) as proxy:
        thread, ordinary = ordinary_stream_during(proxy.url)
        uploads = trickle(settings.listen_host, settings.listen_port, upstream, window_s)
        thread.join(timeout=30)
        uploaded = upstream.stats.body_bytes - body_bytes - len(ORDINARY_BODY)  # the uploads' bytes
    if defence.deadline is None:
        assert uploads.closed_after_s == [None] * UPLOADS, uploads.closed_after_s
    else:  # each closed at the deadline: not before (the trickle went on), not long after
        assert all(c is not None and deadline_s * 0.9 <= c <= deadline_s + LATE_S
                   for c in uploads.closed_after_s), (uploads.closed_after_s, uploads.answers)
        for answer in uploads.answers:  # the proxy's own answer (a 408 in the OpenAI shape), or none
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None
            assert status in defence.answers and (status != 408 or b'"error":' in answer), answer[:300]
    # No upload reached the upstream whole: the one request it read whole was the ordinary stream.
    assert upstream.stats.requests - requests == 1, upstream.stats.requests - requests
    if defence.holds_upstream:  # as measured: every trickle on its own upstream connection
        assert uploads.upstream_established_peak >= UPLOADS and uploaded > 0, (uploads, uploaded)
    else:  # no upload's request reached the upstream while it trickled
        assert uploads.upstream_heads_while_trickling <= 1, uploads
        assert uploaded == 0 or (defence.forwards_cut_body and 0 < uploaded < UPLOADS * UPLOAD_BYTES), \
            (uploads, uploaded)
    [result] = ordinary
    assert result.status == 200 and result.outcome == "complete" and result.content_events == 20
    assert result.ttft_s is not None and result.ttft_s < 0.2 + 0.05, result.ttft_s
    assert result.bursts >= 17, result.content_reads  # a busy 2-core box may merge an odd pair


@pytest.mark.parametrize("proxy_name", on_releases(BOUNDED))
def test_without_the_deadline_the_same_upload_trickles_on(proxy_name: ProxyName, upstream: FakeUpstream) -> None:
    """The converse: the fixed config with its deadline turned off keeps the same trickle open
    well past it, so the test above measures the setting, not an accident of the harness."""
    defence = DEFENCES[proxy_name]
    settings = fixed(proxy_name, upstream.port, **{defence.deadline: defence.off})  # type: ignore[dict-item]
    with run_proxy(settings) as proxy:
        uploads = trickle(proxy.settings.listen_host, proxy.settings.listen_port, upstream,
                          BODY_TIMEOUT_S + LATE_S + 1)
    assert uploads.closed_after_s == [None] * UPLOADS, uploads


def test_nginx_refuses_uploads_beyond_the_per_client_limit(upstream: FakeUpstream) -> None:
    """nginx's mitigation for the deadline it lacks: requests in flight per client address
    (`limit_conn`, 1,024 exported: above the 1,000 streams one gateway sends; scaled to 4 here).
    The next request from that address gets a JSON 429 at once; once the uploads end, it passes."""
    limit = 4
    with run_proxy(fixed("nginx", upstream.port, limit_conn_per_client=limit)) as proxy:
        socks = [socket.create_connection((proxy.settings.listen_host, proxy.settings.listen_port), timeout=5)
                 for _ in range(limit)]
        for sock in socks:
            sock.sendall(UPLOAD_HEAD + b"{")
        requests = upstream.stats.requests
        through = 0  # probes that passed before nginx had counted every upload

        def refused() -> bool:
            nonlocal through
            probe = httpx.post(proxy.url + QUICK, json={"model": "tiny"}, timeout=10)
            through += probe.status_code == 200
            return probe.status_code == 429

        wait_until(refused, 5, interval_s=0.05, describe="a request beyond the limit refused")
        error = assert_openai_error(httpx.post(proxy.url + QUICK, json={"model": "tiny"}, timeout=10),
                                    429, "too_many_connections")
        for sock in socks:
            sock.close()
        wait_until(lambda: httpx.post(proxy.url + QUICK, json={"model": "tiny"}, timeout=10).status_code == 200,
                   5, interval_s=0.05, describe="a request through once the uploads closed")
    assert error["type"] == "invalid_request_error"
    assert upstream.stats.requests - requests == through + 1, "an upload reached the upstream"


def _body() -> bytes:
    return b'{"model": "tiny", "stream": true, "messages": [{"role": "user", "content": "' + \
        b"x" * TOO_LARGE + b'"}]}'


def _chunks(body: bytes) -> Any:
    return (body[start:start + 65536] for start in range(0, len(body), 65536))


def _assert_refused(response: httpx.Response | None, expected: int | str) -> None:
    """The proxy refused the body as DEFENCES states: cut (unanswered, or an error) or its own
    error in the OpenAI shape (411 or 413)."""
    if expected == "cut":
        assert response is None or response.status_code >= 400, response
    else:
        assert response is not None, "the connection was cut, unanswered"
        assert_openai_error(response, expected, "length_required" if expected == 411 else "request_too_large")


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("proxy_name", on_releases(PROXIES))
def test_a_body_over_the_limit_gets_a_json_error_and_never_reaches_the_upstream(
        proxy_name: ProxyName, framing: str, runtime: Runtime, upstream: FakeUpstream) -> None:
    defence, chunked = DEFENCES[proxy_name], framing == "chunked"
    expected = defence.chunked if chunked else defence.sized
    body = _body()
    requests, body_bytes = upstream.stats.requests, upstream.stats.body_bytes
    with runtime.run_proxy(fixed(proxy_name, upstream.port)) as proxy:
        try:
            response: httpx.Response | None = httpx.post(
                proxy.url + "/v1/chat/completions", content=_chunks(body) if chunked else body,
                headers=JSON, timeout=30)
        except httpx.TransportError:  # cut at the limit, unanswered
            response = None
        # The upstream counts a request when its body ends: a forwarded one is counted by now.
        wait_until(lambda: expected != "forwarded" or upstream.stats.requests > requests, 10,
                   interval_s=0.05, describe="the forwarded body counted upstream")
        seen = (upstream.stats.requests - requests, upstream.stats.body_bytes - body_bytes)
        small = httpx.post(proxy.url + QUICK, content=iter(SMALL_CHUNKED), headers=JSON, timeout=30) if chunked else None
    if expected == "forwarded":  # as measured: no limit at the proxy, the body reached it whole
        assert response is not None and response.status_code == 200 and seen[0] == 1, (response, seen)
        assert seen[1] == len(body), seen
    else:
        _assert_refused(response, expected)
    if expected != "forwarded":  # never a whole body upstream; no byte, unless counted on the way
        assert seen[0] == 0, seen
        assert seen[1] == 0 or (chunked and defence.counts_while_forwarding and seen[1] <= MAX_BODY), seen
    if small is not None:  # a small chunked body: refused with every other (411), or passed
        if expected == 411:
            assert_openai_error(small, 411, "length_required")
        else:
            assert small.status_code == 200, small.text[:300]


@pytest.mark.parametrize("proxy_name", REFUSE_CHUNKED)
def test_without_the_rule_a_chunked_body_over_the_limit_reaches_the_upstream_whole(
        proxy_name: ProxyName, upstream: FakeUpstream) -> None:
    """The converse of the 411 (HAProxy, Apache) and of the cut (Varnish): without the rule these
    proxies forward a chunked body of any size, whole."""
    body = b"x" * TOO_LARGE
    body_bytes = upstream.stats.body_bytes
    with run_proxy(fixed(proxy_name, upstream.port, **CHUNKED_RULE_OFF[proxy_name])) as proxy:
        response = httpx.post(proxy.url + QUICK, content=_chunks(body), headers=JSON, timeout=30)
    assert response.status_code == 200 and upstream.stats.body_bytes - body_bytes == TOO_LARGE, \
        (response.status_code, upstream.stats.body_bytes - body_bytes)


# The ordinary streams after the attack: 20 tokens at 50 per second, each read to its [DONE].
AFTER_ATTACK_TOKENS = 20


@pytest.mark.parametrize("proxy_name", on_releases(PROXIES))
def test_ordinary_streams_complete_after_a_chunked_body_over_the_limit(proxy_name: ProxyName,
                                                                      proxy_upstream: Any) -> None:
    """An over-limit chunked upload, then two ordinary streams on the same proxy, in front of the
    lab's server (its own limit is MAX_BODY too): the upload is refused (the proxy's answer as in
    DEFENCES; Traefik, which forwards it whole, gets the server's 413), and each stream completes.
    An independent check saw the fixed Caddy answer both streams 502 at once; no fix was made, as it
    did not recur here (docs/proxies.md says what was tried: `python -m
    tests.reliability.caddy_after_upload`), so this guard holds the case as it runs here."""
    defence, server, body = DEFENCES[proxy_name], proxy_upstream, _body()
    assert len(body) > MAX_BODY
    before = server.metrics()
    with run_proxy(fixed(proxy_name, server.port)) as proxy:
        try:
            upload: httpx.Response | None = httpx.post(proxy.url + "/v1/chat/completions", content=_chunks(body),
                                                       headers=JSON, timeout=30)
        except httpx.TransportError:  # cut at the limit, unanswered
            upload = None
        streams = [stream(proxy.url + "/v1/chat/completions",
                          chat(max_tokens=AFTER_ATTACK_TOKENS, tokens_per_s=50)) for _ in range(2)]
    after = server.metrics()
    served = {status: after.get(f'streamlab_requests_total{{status="{status}"}}', 0)
              - before.get(f'streamlab_requests_total{{status="{status}"}}', 0) for status in (200, 413)}
    assert upload is None or upload.request.headers.get("transfer-encoding") == "chunked"
    if defence.chunked == "forwarded":  # refused by the server's own limit, its 413 passed on
        _assert_refused(upload, 413)
        assert served[413] == 1, served
    else:
        _assert_refused(upload, defence.chunked)
    assert served[200] == 2, served  # the server answered the two streams, never the upload
    for result in streams:
        assert result.status == 200 and result.outcome == "complete", (result.status, result.outcome, result.error)
        assert result.content_events == AFTER_ATTACK_TOKENS, result.content_events
