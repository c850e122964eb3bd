"""docker/compose.yaml under pytest-docker: the model server and each proxy's fixed config, each in
its own container, stream a completion; logs and stats are readable from the host."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.client.results import StreamResult
from proxies import variant
from proxies.base import ProxyName
from proxies.export import FIXED_DIR, export_for
from proxies.kinds import KINDS
from proxies.runtime.containers import CONFIG_DIR, PREFIX
from proxies.runtime.docker import proxy_args
from tests.docker.conftest import WITH_PREFIX, Stack
from tests.runtimes import COMPOSE_PROXIES as PROXIES
from tests.runtimes import stream

REPO = Path(__file__).resolve().parents[2]
REQUEST: dict[str, Any] = {
    "model": "tiny", "stream": True, "max_tokens": 20,
    "messages": [{"role": "user", "content": "Tell me a story."}],
    # A script makes the text (and so the event count) exact; each token is still a real forward pass.
    # Headers 50 ms in, as a model's: clear of Traefik's early cut of POST streams answered at once.
    "lab": {"tokens_per_s": 50, "headers_delay_s": 0.05,
            "script": "Streaming through a container, one token at a time."},
}


def completion(url: str) -> StreamResult:
    return stream(url + "/v1/chat/completions", REQUEST)


def test_compose_runs_what_the_runtime_runs() -> None:
    """The compose file's command lines and mounts are the Docker runtime's, and the configs it
    mounts by default are proxies/fixed/ (the test stack only moves them to free ports)."""
    services = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["services"]
    for proxy in PROXIES:
        service, fixed = services[proxy], variant(proxy, "fixed")
        assert service["entrypoint"] == [KINDS[proxy].image.entrypoint]
        # Varnish's listen port is a flag: a variable in the file, 8080 (the fixed one) by default.
        command = [arg.replace("${VARNISH_PORT:-8080}", "8080") for arg in service["command"]]
        assert command == proxy_args(fixed)
        assert service["network_mode"] == "host" and service["init"] is True
        name = fixed.config_name
        assert f"../proxies/fixed/{name}}}:{CONFIG_DIR}/{name}:ro" in service["volumes"][0]
        # The current release's file: its render, under the header naming what it is proven on.
        assert (FIXED_DIR / name).read_text() == export_for(proxy).text(fixed)
        if proxy in WITH_PREFIX:
            assert service["volumes"][1].endswith(f":{PREFIX}") and service.get("working_dir", PREFIX) == PREFIX
        assert service.get("environment", {}) == KINDS[proxy].env(f"{PREFIX}/")


@pytest.mark.parametrize("proxy", PROXIES)
def test_fixed_config_streams_a_completion_in_containers(proxy: ProxyName, compose_stack: Stack) -> None:
    direct = completion(compose_stack.server_url)
    assert direct.status == 200 and direct.outcome == "complete"
    through = completion(compose_stack.proxies[proxy].url)
    assert through.status == 200 and through.outcome == "complete"
    assert through.headers["content-type"].startswith("text/event-stream")
    assert "content-encoding" not in through.headers
    assert through.content_events == direct.content_events
    # 50 tokens/s, 20 ms apart: an unbuffered hop delivers them in many reads, not one lump.
    assert through.bursts >= through.content_events // 2, through.content_reads


def test_nginx_logs_land_in_the_mounted_prefix(compose_stack: Stack) -> None:
    completion(compose_stack.proxies["nginx"].url)
    access = (compose_stack.nginx_prefix / "access.log").read_text()
    assert 'uri="/v1/chat/completions" status=200' in access


def test_envoy_stats_through_its_admin_socket(compose_stack: Stack) -> None:
    envoy = compose_stack.proxies["envoy"]
    completion(envoy.url)
    assert envoy.endpoint.admin_socket == compose_stack.prefix("envoy") / "admin.sock"
    counters = envoy.stats("cluster.upstream.upstream_rq_total")  # through the mounted socket
    assert counters["cluster.upstream.upstream_rq_total"] >= 1, counters
