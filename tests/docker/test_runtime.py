"""DockerRuntime's own checks: parallel runs never collide, the model server runs in a container.

The smoke checks both runtimes share (start, ready, logs, stop even when the body raises, no
leftovers, the fixed configs streaming) run for containers in tests/proxies/test_runtime.py, as
its `docker` case.
"""
from __future__ import annotations

import contextlib
import urllib.request
from typing import Iterator

import pytest

from proxies import variant
from proxies.runtime.docker import run_proxy, running_server
from server.processes import port_accepts
from tests.proxies.sse_upstream import SseUpstream, sse_upstream
from tests.runtimes import assert_gone, get, on_free_ports


@pytest.fixture(scope="module")
def upstream(images: dict[str, str]) -> Iterator[SseUpstream]:
    with sse_upstream() as server:
        yield server


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


def test_model_server_runs_in_a_container(server_image: str) -> None:
    """The same ServerHandle as server.launcher's, from a container (offline: the host's
    interpreter and .venv mounted read-only)."""
    with running_server(["--engine", "synthetic"]) as server:
        with urllib.request.urlopen(server.url + "/v1/models", timeout=5) as response:
            assert response.status == 200
        assert server.metrics()["streamlab_active_streams"] == 0
        assert server.process.process is not None and server.process.process.poll() is None
    assert server.process.process.poll() is not None
    assert not port_accepts(server.port)
