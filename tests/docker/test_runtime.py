"""DockerRuntime passes the local runtime's smoke checks: free ports, readiness by polling, logs
read the same way, stopped by container id (even when the body raises), no leftovers, no
collisions between parallel runs."""
from __future__ import annotations

import contextlib
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from labs.runner import runtime_named
from proxies import ConfigInvalid, NginxSettings, ProxySettings, variant
from proxies.base import ProxyName
from proxies.runtime.base import RunningProxy
from proxies.runtime.docker import DockerProxy, DockerRuntime, run_proxy
from proxies.runtime.dockercli import docker
from proxies.runtime.process import free_port, port_accepts, wait_until
from tests.docker.conftest import PROXIES
from tests.proxies.sse_upstream import SseUpstream, sse_upstream
from tests.proxies.stream_client import stream_sync

ACCESS_FIELDS = {
    "nginx": {"status", "upstream_status", "request_time", "upstream_response_time", "bytes_sent"},
    "haproxy": {"status", "termination_state", "Tr", "Ta", "server"},
    "envoy": {"status", "flags", "duration_ms", "upstream_host"},
}


@pytest.fixture(scope="module")
def upstream(images: dict[str, str]) -> Iterator[SseUpstream]:
    with sse_upstream() as server:
        yield server


def on_free_ports(settings: ProxySettings, upstream_port: int) -> ProxySettings:
    changes: dict[str, int] = {"listen_port": free_port(), "upstream_port": upstream_port}
    if settings.proxy == "envoy":
        changes["admin_port"] = free_port()
    return settings.with_(**changes)


def container_exists(proxy: DockerProxy) -> bool:
    assert proxy.container is not None
    listed = docker(["ps", "--all", "--quiet", "--no-trunc", "--filter", f"name={proxy.container.name}"])
    return bool(listed.stdout.strip())


def assert_gone(proxy: DockerProxy) -> None:
    assert not container_exists(proxy)
    assert proxy.process.process is not None and proxy.process.process.poll() is not None
    assert not port_accepts(proxy.settings.listen_port)


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        response.read()
        return response.status


def test_labs_select_it_by_name() -> None:
    assert isinstance(runtime_named("docker"), DockerRuntime)


@pytest.mark.parametrize("name", PROXIES)
def test_starts_serves_logs_and_stops(name: ProxyName, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant(name, "defaults"), upstream.port)
    started = time.monotonic()
    with DockerRuntime().run_proxy(settings) as proxy:
        assert isinstance(proxy, RunningProxy) and isinstance(proxy, DockerProxy)
        assert proxy.url == f"http://127.0.0.1:{settings.listen_port}"
        assert proxy.pid > 0 and len(proxy.container_id) == 64 and container_exists(proxy)
        assert get(proxy.url + "/healthz") == 200
        wait_until(lambda: len(proxy.access_log()) == 1, 5, describe="the access line")
        entry = proxy.access_entries()[0]
        assert ACCESS_FIELDS[name] <= set(entry), entry
        assert entry["status"] == "200"
        workdir = proxy.workdir
        if name == "haproxy":
            assert "missing timeouts" in proxy.error_log()
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 3, "a stop must not wait for the 10 s docker default"
    assert_gone(proxy)
    assert not workdir.exists()
    del started


@pytest.mark.parametrize("name", PROXIES)
def test_stops_when_the_body_raises(name: ProxyName, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant(name, "fixed"), upstream.port)
    with pytest.raises(RuntimeError, match="boom"):
        with run_proxy(settings) as proxy:
            raise RuntimeError("boom")
    assert_gone(proxy)


def test_an_invalid_config_never_starts(upstream: SseUpstream) -> None:
    settings = on_free_ports(NginxSettings(proxy_buffer_size="64k"), upstream.port)
    with pytest.raises(ConfigInvalid, match="proxy_busy_buffers_size"):
        with run_proxy(settings):
            pytest.fail("started")
    assert not port_accepts(settings.listen_port)


def test_nginx_logs_are_files_in_the_workdir(tmp_path: Path, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant("nginx", "fixed"), upstream.port)
    with run_proxy(settings, workdir=tmp_path / "nginx") as proxy:
        assert get(proxy.url + "/healthz") == 200
    assert (tmp_path / "nginx" / "nginx.conf").read_text() == proxy.config_text
    assert "status=200" in (tmp_path / "nginx" / "access.log").read_text()


def test_envoy_stats(upstream: SseUpstream) -> None:
    settings = on_free_ports(variant("envoy", "fixed"), upstream.port)
    with run_proxy(settings) as proxy:
        assert get(proxy.url + "/healthz") == 200
        counters = proxy.stats("cluster.upstream.")
        assert counters["cluster.upstream.upstream_rq_total"] == 1
        assert counters["cluster.upstream.upstream_rq_timeout"] == 0


def test_parallel_runs_never_collide(upstream: SseUpstream) -> None:
    """Two of the same proxy at once (as two lab sessions would): distinct names, both serve."""
    with contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(run_proxy(on_free_ports(variant("nginx", "fixed"), upstream.port)))
                   for _ in range(2)]
        assert proxies[0].container and proxies[1].container
        assert proxies[0].container.name != proxies[1].container.name
        assert all(get(p.url + "/healthz") == 200 for p in proxies)
    for proxy in proxies:
        assert_gone(proxy)


@pytest.mark.parametrize("name", PROXIES)
def test_fixed_config_streams_every_event_at_once(name: ProxyName, upstream: SseUpstream) -> None:
    settings = on_free_ports(variant(name, "fixed"), upstream.port)
    with run_proxy(settings) as proxy:
        result = stream_sync(proxy.url + "/v1/chat/completions?n=20&interval=0.05", method="POST",
                             body={"model": "x", "stream": True})
    assert result.status == 200 and result.done
    assert "content-encoding" not in result.headers
    assert result.events == 20
    assert result.ttft_s is not None and result.ttft_s < 0.2
    assert result.event_reads >= 17, result.reads


@pytest.mark.parametrize("name", PROXIES)
def test_fixed_config_passes_a_client_disconnect_upstream(name: ProxyName, upstream: SseUpstream) -> None:
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


def test_model_server_runs_in_a_container(server_image: str) -> None:
    """The same ServerHandle as server.launcher's, from a container (offline: the host's
    interpreter and .venv mounted read-only)."""
    from proxies.runtime.docker import running_server

    with running_server(["--engine", "synthetic"]) as server:
        with urllib.request.urlopen(server.url + "/v1/models", timeout=5) as response:
            assert response.status == 200
        assert server.metrics()["streamlab_active_streams"] == 0
        assert server.process.process is not None and server.process.process.poll() is None
    assert server.process.process.poll() is not None
    assert not port_accepts(server.port)
