"""The load lab: the first-limit analysis on hand-made steps, the steady rate, the /proc sampler,
and a small bounded run (20 streams through each fixed proxy and direct)."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from labs.load import (SYNTHETIC, LoadLab, LoadPath, StepResult, diagnose, first_limit, steady_rate,
                       ttft_histogram)
from labs.client.results import Event, StreamResult
from labs.client.resources import Sampler, accept_queues, cpu_s, machine_cpu, open_fds

REPO = Path(__file__).resolve().parents[2]


def step(n: int, **changes: Any) -> StepResult:
    """A healthy step of n streams at 20 tok/s for 8 s, then `changes`."""
    base: dict[str, Any] = dict(
        path="p", concurrency=n, tokens_per_stream=160, tokens_per_s=20.0, duration_s=8.0,
        outcomes={"complete": n}, ttft_p50_s=0.01, ttft_p99_s=0.05, gap_p50_s=0.05,
        gap_p99_s=0.055, content_events=160 * n, wall_s=8.1, delivered_tok_s=20.0 * n,
        client_cpu_s=0.5, server={"cpu_pct": 20.0, "fds_peak": n + 15, "fd_limit": 20000},
        proxy={"cpu_pct": 10.0, "fds_peak": 2 * n + 10, "fd_limit": 16384}, machine_busy_pct=60.0)
    base.update(changes)
    return StepResult(**base)


def test_healthy_steps_have_no_limit() -> None:
    steps = [step(10), step(100)]
    assert all(s.healthy for s in steps)
    assert first_limit(steps) is None
    assert diagnose(steps[0]) == []


def test_nginx_worker_connections_named_from_its_log_line() -> None:
    broken = step(300, outcomes={"complete": 239, "reset": 61}, content_events=239 * 160,
                  delivered_tok_s=239 * 20.0,
                  proxy_log={"512 worker_connections are not enough, reusing connections": 3})
    hit = first_limit([step(1000), broken, step(100)])  # order by concurrency, not by list
    assert hit is not None
    at, limits = hit
    assert at.concurrency == 300
    assert limits[0].name == "nginx worker_connections"
    assert "61 of 300 streams failed (61 reset)" in limits[0].evidence
    assert "worker_connections are not enough" in limits[0].evidence


@pytest.mark.parametrize("changes, name", [
    pytest.param({"outcomes": {"complete": 256, "http-error": 44},
                  "proxy_counters": {"cluster.upstream.upstream_rq_pending_overflow": 44}},
                 "Envoy circuit breaker", id="envoy-overflow"),
    pytest.param({"outcomes": {"complete": 16, "http-error": 16}, "server_statuses": {"200": 16, "429": 16}},
                 "engine slots and queue full (429 queue_full)", id="server-429"),
    pytest.param({"outcomes": {"complete": 200, "timeout": 100}, "errors": {"httpx.PoolTimeout": 100}},
                 "client connection pool", id="client-pool"),
    pytest.param({"outcomes": {"complete": 497, "reset": 103},
                  "server": {"cpu_pct": 30.0, "fds_peak": 512, "fd_limit": 512}},
                 "server open-file limit (soft RLIMIT_NOFILE 512)", id="server-fds"),
    pytest.param({"ttft_p99_s": 8.2, "accept_queue_peak": 44, "delivered_tok_s": 3000.0},
                 "proxy stops accepting (maxconn): streams wait in the kernel's accept queue",
                 id="haproxy_maxconn-waves"),
    pytest.param({"ttft_p99_s": 3.1, "tcp_counters": {"ListenOverflows": 12, "TCPSynRetrans": 12},
                  "ttft_histogram": {"<0.5 s": 988, "<2 s": 8, "<4 s": 4}},
                 "a listen queue overflowed", id="listen-overflow"),
    pytest.param({"ttft_p50_s": 0.9, "ttft_p99_s": 1.3, "server_accept_queue_peak": 100},
                 "server admission of a burst (CPU per request)", id="admission-burst"),
    pytest.param({"gap_p99_s": 0.4, "delivered_tok_s": 4000.0,
                  "server": {"cpu_pct": 97.0, "fds_peak": 315, "fd_limit": 20000}},
                 "server CPU (one core)", id="server-cpu"),
    pytest.param({"gap_p99_s": 0.3, "machine_busy_pct": 196.0}, "machine CPU", id="machine-cpu"),
    pytest.param({"gap_p99_s": 0.31, "hop_p99_s": 0.038}, "the server sends late", id="server-late"),
    pytest.param({"gap_p99_s": 0.31, "hop_p99_s": 0.26}, "delivery late after the server", id="path-late"),
])
def test_each_limit_is_named_from_its_evidence(changes: dict[str, Any], name: str) -> None:
    limits = diagnose(step(300, **changes))
    assert limits, "an unhealthy step always gets a diagnosis"
    assert limits[0].name.startswith(name)


def test_unhealthy_without_evidence_says_so() -> None:
    limits = diagnose(step(300, gap_p99_s=0.3))
    assert [x.where for x in limits] == ["unknown"]


def _stream(start: float, ttft: float, n: int, interval: float, outcome: str = "complete") -> StreamResult:
    events = [Event(ttft + i * interval, i + 1, "content", "x") for i in range(n)]
    return StreamResult(outcome=outcome, start_s=start, ttft_s=ttft, e2e_s=events[-1].t, events=events)


def test_steady_rate_counts_only_while_every_stream_is_open() -> None:
    # Two streams of 20 tok/s for ~5 s, the second admitted 1 s late: the window is [1, 5].
    results = [_stream(0.0, 0.0, 100, 0.05), _stream(0.0, 1.0, 100, 0.05)]
    rate, window = steady_rate(results, wall_s=6.0)
    assert window == pytest.approx(3.95, abs=0.01)
    assert rate == pytest.approx(40.0, rel=0.03)


def test_steady_rate_falls_back_to_wall_time_for_waves() -> None:
    # The second stream starts when the first ends: no moment with both open.
    results = [_stream(0.0, 0.0, 20, 0.05), _stream(0.0, 1.0, 20, 0.05)]
    rate, window = steady_rate(results, wall_s=2.0)
    assert window is None and rate == pytest.approx(20.0)


def test_ttft_histogram_shows_the_retransmit_ladder() -> None:
    assert ttft_histogram([0.01, 0.02, 0.3, 1.2, 3.1, 7.2, 9.0]) == {
        "<0.1 s": 2, "<0.5 s": 1, "<2 s": 1, "<4 s": 1, "<8 s": 1, ">=8 s": 1}


def test_sampler_reads_cpu_fds_and_the_accept_queue() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    waiting = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]  # never accepted
    try:
        assert accept_queues([port]) == {port: 3}
        with Sampler({"me": os.getpid()}, ports=[port], interval_s=0.02) as sampler:
            deadline = time.process_time() + 0.1
            while time.process_time() < deadline:  # burn a little CPU
                pass
            extra = [socket.socket() for _ in range(5)]
            # Other fds of this test process come and go (earlier tests' sockets are collected),
            # so compare with what is open now, not with the count at the start; the sampler
            # thread may hold one /proc file open while we count, hence the one fd of slack.
            open_now = open_fds(os.getpid())
        me = sampler.usage["me"]
        assert me.cpu_s >= 0.05 and me.cpu_pct > 0
        assert me.fds_peak >= open_now - 1
        assert me.fd_limit and me.fd_limit > 0
        assert sampler.queue_peak[port] == 3
        assert 0 < sampler.machine_busy_pct <= 100 * (os.cpu_count() or 1) + 1
    finally:
        for s in [*waiting, *locals().get("extra", []), listener]:
            s.close()
    assert cpu_s(os.getpid()) > 0 and open_fds(os.getpid()) > 0
    busy, total = machine_cpu()
    assert 0 < busy < total


@pytest.fixture(scope="module")
def lab() -> Iterator[LoadLab]:
    with LoadLab(duration_s=1.0) as running:
        yield running


@pytest.mark.parametrize("proxy", [None, "nginx", "haproxy", "envoy"], ids=lambda p: p or "direct")
def test_twenty_streams_complete_through_each_fixed_config(lab: LoadLab, proxy: str | None) -> None:
    path = LoadPath(proxy or "direct", "fixed", "fixed", proxy=proxy)
    server = lab.server(SYNTHETIC)
    with lab.proxy(path, server.port) as running:
        result = lab.run_step(path, 20, server, running)
    assert result.outcomes == {"complete": 20}, result.errors
    assert result.server_statuses == {"200": 20}
    assert result.content_events == 20 * result.tokens_per_stream
    assert result.server["fds_peak"] >= 20  # each stream held a socket on the server
    if proxy is not None:
        assert result.proxy is not None and result.proxy["fds_peak"] >= 40  # client + upstream
    assert result.client_cpu_s > 0 and result.hop_p99_s is not None
