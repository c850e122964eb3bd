"""The local runtime: start on free ports, ready by polling, logs captured, stopped by PID, no leftovers."""
from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from proxies import ConfigInvalid, NginxSettings, ProxySettings, variant
from proxies.runtime import get_runtime
from proxies.runtime.base import RunningProxy
from proxies.runtime.local import LocalProxy, run_proxy
from proxies.runtime.process import free_port, port_accepts, wait_until
from tests.proxies.sse_upstream import SseUpstream, sse_upstream
from tests.proxies.stream_client import stream_sync

PROXIES = ["nginx", "haproxy", "envoy"]
# Fields each proxy's parsed access line must carry.
ACCESS_FIELDS = {
    "nginx": {"status", "upstream_status", "request_time", "upstream_response_time",
              "upstream_connect_time", "bytes_sent"},
    "haproxy": {"status", "termination_state", "Tr", "Ta", "server"},
    "envoy": {"status", "flags", "duration_ms", "upstream_host"},
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[SseUpstream]:
    with sse_upstream() as server:
        yield server


def on_free_ports(settings: ProxySettings, upstream_port: int) -> ProxySettings:
    changes: dict[str, int] = {"listen_port": free_port(), "upstream_port": upstream_port}
    if settings.proxy == "envoy":
        changes["admin_port"] = free_port()
    return settings.with_(**changes)


def group_members(pgid: int) -> list[int]:
    """PIDs whose process group is `pgid` (nginx workers, anything the proxy forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def assert_gone(proxy: LocalProxy) -> None:
    assert proxy.process.process is not None and proxy.process.process.poll() is not None
    assert group_members(proxy.pid) == []
    assert not port_accepts(proxy.settings.listen_port)


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        response.read()
        return response.status


@pytest.mark.parametrize("name", PROXIES)
def test_starts_serves_logs_and_stops(name: str, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant(name, "defaults"), upstream.port)
    with run_proxy(settings) as proxy:
        assert isinstance(proxy, RunningProxy)
        assert proxy.url == f"http://127.0.0.1:{settings.listen_port}"
        assert proxy.pid > 0 and os.getpgid(proxy.pid) == proxy.pid
        assert f"Listens on 127.0.0.1:{settings.listen_port}," in proxy.config_text
        assert get(proxy.url + "/healthz") == 200
        assert len(proxy.wait_access_log(1, timeout_s=2)) == 1  # Envoy flushes every 10 s unless told
        entry = proxy.access_entries()[0]
        assert ACCESS_FIELDS[name] <= set(entry), entry
        assert entry["status"] == "200"
        workdir = proxy.workdir
        if name == "haproxy":  # HAProxy's defaults have no timeouts, and it says so
            assert "missing timeouts" in proxy.error_log()
    assert_gone(proxy)
    assert not workdir.exists()


@pytest.mark.parametrize("name", PROXIES)
def test_stops_when_the_body_raises(name: str, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant(name, "fixed"), upstream.port)
    with pytest.raises(RuntimeError, match="boom"):
        with run_proxy(settings) as proxy:
            raise RuntimeError("boom")
    assert_gone(proxy)


def test_nginx_workers_are_stopped_too(upstream: SseUpstream) -> None:
    settings = on_free_ports(NginxSettings(worker_processes=2), upstream.port)
    with run_proxy(settings) as proxy:
        wait_until(lambda: len(group_members(proxy.pid)) == 3, 5, describe="master + 2 workers")
    assert_gone(proxy)  # the workers, which run as another user when root, included


def test_workdir_is_kept_when_given(tmp_path: Path, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant("nginx", "fixed"), upstream.port)
    with run_proxy(settings, workdir=tmp_path / "nginx") as proxy:
        assert get(proxy.url + "/healthz") == 200
    assert (tmp_path / "nginx" / "nginx.conf").read_text() == proxy.config_text
    assert "status=200" in (tmp_path / "nginx" / "access.log").read_text()


def test_an_invalid_config_never_starts(upstream: SseUpstream) -> None:
    settings = on_free_ports(NginxSettings(proxy_buffer_size="64k"), upstream.port)
    with pytest.raises(ConfigInvalid, match="proxy_busy_buffers_size"):
        with run_proxy(settings):
            pytest.fail("started")
    assert not port_accepts(settings.listen_port)


def test_envoy_stats_and_runtime_registry(upstream: SseUpstream) -> None:
    settings = on_free_ports(variant("envoy", "fixed"), upstream.port)
    with get_runtime("local").run_proxy(settings) as proxy:
        assert get(proxy.url + "/healthz") == 200
        counters = proxy.stats("cluster.upstream.")
        assert counters["cluster.upstream.upstream_rq_total"] == 1
        assert counters["cluster.upstream.upstream_rq_timeout"] == 0
        assert "http.ingress.downstream_cx_destroy_remote_active_rq" in proxy.stats("http.ingress.")
    with run_proxy(on_free_ports(variant("nginx", "fixed"), upstream.port)) as nginx:
        with pytest.raises(NotImplementedError):
            nginx.stats()


@pytest.mark.parametrize("name", PROXIES)
def test_fixed_config_streams_every_event_at_once(name: str, upstream: SseUpstream) -> None:
    """Smoke: 20 events 50 ms apart through the fixed config arrive one read each, uncompressed."""
    settings = on_free_ports(variant(name, "fixed"), upstream.port)
    with run_proxy(settings) as proxy:
        result = stream_sync(proxy.url + "/v1/chat/completions?n=20&interval=0.05", method="POST",
                             body={"model": "x", "stream": True})
    assert result.status == 200 and result.done
    assert "content-encoding" not in result.headers, "text/event-stream must not be compressed"
    assert result.events == 20
    assert result.ttft_s is not None and result.ttft_s < 0.2
    assert result.event_reads >= 17, result.reads  # a busy 2-core box may merge an odd pair


@pytest.mark.parametrize("name", PROXIES)
def test_fixed_config_passes_a_client_disconnect_upstream(name: str, upstream: SseUpstream) -> None:
    """The client hangs up mid-stream: the upstream must see its connection close within ~100 ms."""
    settings = on_free_ports(variant(name, "fixed"), upstream.port)
    with run_proxy(settings) as proxy:
        before = len(upstream.stats.disconnects)
        result = stream_sync(proxy.url + "/v1/chat/completions?n=50&interval=0.5", method="POST",
                             body={}, abort_after_events=2)
        assert result.closed_at is not None
        wait_until(lambda: len(upstream.stats.disconnects) > before, 2,
                   describe="the upstream to see the disconnect")
        delay = upstream.stats.disconnects[-1] - result.closed_at
    assert 0 <= delay < 0.1, f"disconnect reached the upstream after {delay * 1000:.0f} ms"


@pytest.mark.parametrize("name", PROXIES)
def test_fixed_config_reuses_upstream_connections(name: str) -> None:
    """A keep-alive client (as SDK connection pools are) sends 5 requests: few upstream connections."""
    with sse_upstream() as fresh:
        settings = on_free_ports(variant(name, "fixed"), fresh.port)
        with run_proxy(settings) as proxy:
            client = http.client.HTTPConnection(settings.listen_host, settings.listen_port, timeout=10)
            try:
                for _ in range(5):
                    client.request("POST", "/v1/chat/completions?n=2&interval=0", body=b"{}",
                                   headers={"Content-Type": "application/json"})
                    assert b"[DONE]" in client.getresponse().read()
            finally:
                client.close()
        assert fresh.stats.requests == 5
        # One pool per nginx worker (worker_processes auto: one per core). HAProxy's `http-reuse
        # safe` shares a server connection within a client's session, not across clients.
        assert fresh.stats.connections <= min(2, os.cpu_count() or 1), "no upstream keepalive"


@pytest.mark.parametrize(("name", "status", "field", "value"), [
    ("nginx", 502, "upstream_status", "502"),
    ("haproxy", 503, "termination_state", "SC--"),
    ("envoy", 503, "flags", "UF"),
])
def test_an_unreachable_upstream_shows_in_the_logs(name: str, status: int, field: str, value: str) -> None:
    fixed = variant(name, "fixed")
    if name == "haproxy":
        fixed = fixed.with_(timeout_connect="100ms")  # refused connects are retried 3 times, this long apart
    settings = on_free_ports(fixed, free_port())  # nothing listens there
    with run_proxy(settings) as proxy:
        with pytest.raises(urllib.error.HTTPError) as caught:
            get(proxy.url + "/healthz")
        assert caught.value.code == status
        proxy.wait_access_log(1, timeout_s=2)
        entry = proxy.access_entries()[-1]
        assert entry[field] == value, entry
        if name == "nginx":
            assert "connect() failed (111: Connection refused)" in proxy.error_log()
