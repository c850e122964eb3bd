"""Faults behind each fixed proxy (proxies/fixed/): the server killed mid-stream, the proxy
restarted, clients leaving (one, then 100 at random points), and HAProxy's client timeout, which
must bound a client, never a silence of the server's."""
from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from typing import Any, Iterator

import httpx
import pytest

from proxies.base import ProxyName
from proxies.runtime.local import run_proxy
from tests.reliability.proxy_faults import (PROXIES, assert_openai_error, chat, content_event,
                                            fixed, fixed_proxy, gauges, running_server,
                                            wait_all_freed)

pytestmark = pytest.mark.slow
TOKENS_PER_S = 20.0  # one token every 50 ms: the pacing every bound below is derived from
ABORTED = 'streamlab_requests_aborted_total{reason="disconnect"}'
# A departure reaches the server within a decode step plus the proxy's abort (~0.1 s here);
# freeing 100 of them at once on 2 shared cores gets 10 s.
FREED_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def server(proxy_upstream: Any) -> Any:
    return proxy_upstream  # shared by the session (conftest)


def _read_events(lines: Iterator[str], count: int) -> int:
    """Read from one `response.iter_lines()` until `count` tokens arrived. The caller keeps the
    iterator: breaking out of it, or letting it be collected, closes the response (the client
    would leave right there)."""
    seen = 0
    while seen < count and (line := next(lines, None)) is not None:
        seen += content_event(line)
    return seen


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_server_killed_mid_stream_ends_the_stream_promptly(proxy_name: ProxyName) -> None:
    with running_server() as doomed, fixed_proxy(proxy_name, doomed.port) as proxy:
        body = chat(max_tokens=400, tokens_per_s=TOKENS_PER_S)  # 20 s if nothing happened
        lines: list[str] = []
        # A hang would show as a ReadTimeout after 10 s; the stream must end long before.
        with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=body, timeout=10) as response:
            stream = response.iter_lines()
            assert response.status_code == 200 and _read_events(stream, 3) == 3
            os.kill(doomed.process.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            try:
                lines.extend(stream)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                pass  # a cut chunked body; a hang would raise ReadTimeout, which fails the test
            ended_after = time.monotonic() - killed_at
        assert "data: [DONE]" not in lines
        assert ended_after < 3.0, f"the stream ended {ended_after:.1f} s after the server died"
        # Nothing hangs afterwards: the next request gets the proxy's own error at once.
        started = time.monotonic()
        after = httpx.post(proxy.url + "/v1/chat/completions", json=chat(), timeout=10)
        assert_openai_error(after, (502, 503), "upstream_unavailable")
        assert time.monotonic() - started < 5.0  # HAProxy retries the connect 3 times, 1 s apart


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_proxy_restarted_the_next_request_succeeds(proxy_name: ProxyName, server: Any) -> None:
    settings = fixed(proxy_name, server.port)
    with httpx.Client(timeout=10) as client:  # one pool: its kept-alive connection dies with the proxy
        pids = []
        for _ in range(2):
            with run_proxy(settings) as proxy:
                pids.append(proxy.pid)
                with client.stream("POST", proxy.url + "/v1/chat/completions", json=chat()) as response:
                    lines = list(response.iter_lines())
                assert response.status_code == 200 and "data: [DONE]" in lines
    assert pids[0] != pids[1]  # really a new process on the same port


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_client_disconnect_frees_the_slot(proxy_name: ProxyName, server: Any) -> None:
    before = server.metrics().get(ABORTED, 0)
    with fixed_proxy(proxy_name, server.port) as proxy:
        body = chat(max_tokens=400, tokens_per_s=TOKENS_PER_S)
        with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=body, timeout=10) as response:
            stream = response.iter_lines()  # kept: a collected iter_lines() closes the response
            assert _read_events(stream, 3) == 3
            assert gauges(server)["streamlab_slots_in_use"] >= 1  # the stream held a slot
        left_at = time.monotonic()
        wait_all_freed(server, FREED_WITHIN_S)
        freed_after = time.monotonic() - left_at
    assert server.metrics().get(ABORTED, 0) - before == 1  # the server saw the departure
    assert freed_after < 2.0, f"the slot was held {freed_after:.2f} s after the client left"


async def _leave_at(client: httpx.AsyncClient, url: str, leave_after_s: float | None,
                    events: list[int], leave_after_events: int | None = None) -> None:
    """Start a 20 s stream and hang up after `leave_after_s` (wherever the stream is then), or
    right after the `leave_after_events`-th content event (mid-stream however late it started)."""
    seen = [0]

    async def read() -> None:
        body = chat(max_tokens=400, tokens_per_s=TOKENS_PER_S)
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                seen[0] += content_event(line)
                if leave_after_events is not None and seen[0] >= leave_after_events:
                    return  # leaving the block closes the connection
    try:
        await asyncio.wait_for(read(), leave_after_s)  # cancelled there: the connection closes
    except asyncio.TimeoutError:
        pass
    events.append(seen[0])


def _peak_slots(server: Any, stop: threading.Event, peak: list[float]) -> None:
    while not stop.is_set():
        peak.append(gauges(server)["streamlab_slots_in_use"])
        stop.wait(0.05)


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_100_clients_leaving_at_random_points_free_every_slot(proxy_name: ProxyName, server: Any) -> None:
    rng = random.Random(f"proxies-hostile-{proxy_name}")
    # A fifth leave within 50 ms (before or just after the headers), the rest mid-stream: after
    # as many events as 0.3-2.0 s of the stream carry (counted, not timed, so a machine busy with
    # other tests that starts the streams late still has them leave mid-stream).
    leave_after = [(rng.uniform(0.0, 0.05), None) if rng.random() < 0.2
                   else (30.0, max(1, round(rng.uniform(0.3, 2.0) * TOKENS_PER_S))) for _ in range(100)]
    events: list[int] = []
    with fixed_proxy(proxy_name, server.port) as proxy:
        stop, peak = threading.Event(), [0.0]
        sampler = threading.Thread(target=_peak_slots, args=(server, stop, peak), daemon=True)
        sampler.start()

        async def everyone() -> None:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
            async with httpx.AsyncClient(timeout=30, limits=limits) as client:
                await asyncio.gather(*(_leave_at(client, proxy.url, after, events, count)
                                       for after, count in leave_after))
        try:
            asyncio.run(asyncio.wait_for(everyone(), timeout=30))
        finally:
            stop.set()
            sampler.join()
        wait_all_freed(server, FREED_WITHIN_S)
    # What the test depends on happened: real load, departures mid-stream, and none finished.
    assert len(events) == 100
    assert max(peak) >= 16, f"only {max(peak):.0f} slots were ever busy at once"
    assert sum(1 for seen in events if seen > 0) >= 50, sorted(events)
    assert max(events) < 400


def test_haproxy_client_timeout_bounds_the_client_not_a_server_silence(server: Any) -> None:
    """timeout client (60 s in proxies/fixed) is scaled to 1 s: a stream silent for 3 s still ends
    with [DONE]. The other direction: timeout server at 1 s cuts that same stream."""
    body = chat(max_tokens=10, tokens_per_s=50, pause_after_tokens=3, pause_s=3.0, heartbeat_s=0)
    outcomes = {}
    for timeouts in ({"timeout_client": 1}, {"timeout_server": 1}):
        with fixed_proxy("haproxy", server.port, **timeouts) as proxy:
            started = time.monotonic()
            try:
                with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=body, timeout=10) as response:
                    lines = list(response.iter_lines())
            except httpx.RemoteProtocolError:
                lines = []
            outcomes[next(iter(timeouts))] = ("data: [DONE]" in lines, time.monotonic() - started)
    assert outcomes["timeout_client"][0] and outcomes["timeout_client"][1] >= 3.0, outcomes
    assert not outcomes["timeout_server"][0] and outcomes["timeout_server"][1] < 3.0, outcomes
