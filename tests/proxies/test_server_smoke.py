"""Smoke: each proxy's fixed config in front of the real model server streams a completion, on
every release the lab runs of it (proxies.export: the file of that release)."""
from __future__ import annotations

from typing import Any

import pytest

from labs.client.results import StreamResult
from proxies import variant
from proxies.kinds import KINDS
from proxies.runtime.local import run_proxy
from tests.runtimes import on_free_ports, stream

# Never skipped: these tests stream through the session's synthetic-engine server, which needs
# no built model (they used to skip, at collection, before `.models/tiny` existed); a test the
# suite promises to run fails loudly when it cannot.
pytestmark = [pytest.mark.slow]

REQUEST: dict[str, Any] = {
    "model": "tiny", "stream": True, "max_tokens": 20,
    "messages": [{"role": "user", "content": "Tell me a story."}],
    "lab": {"tokens_per_s": 50},
}


@pytest.fixture(scope="module")
def server(synthetic_server: Any) -> Any:
    return synthetic_server  # shared by the session (tests/conftest.py)


def completion(url: str) -> StreamResult:
    return stream(url + "/v1/chat/completions", REQUEST)


# nginx, HAProxy and Envoy as before; Varnish and Caddy too, which run two releases as well.
RELEASES = [pytest.param(name, release.series, id=f"{name}-{release.series}")
            for name in ("nginx", "haproxy", "envoy", "varnish", "caddy") for release in KINDS[name].releases]


@pytest.mark.parametrize(("name", "series"), RELEASES)
def test_fixed_proxy_streams_a_completion(name: str, series: str, server: Any) -> None:
    direct = completion(server.url)
    assert direct.status == 200 and direct.outcome == "complete"
    with run_proxy(on_free_ports(variant(name, "fixed").with_(version=series), server.port)) as proxy:
        assert proxy.settings.version == series
        through = completion(proxy.url)
    assert through.status == 200 and through.outcome == "complete"
    assert through.headers["content-type"].startswith("text/event-stream")
    assert "content-encoding" not in through.headers
    assert through.content_events == direct.content_events
    # Tokens are paced at 50/s (20 ms apart): an unbuffered hop delivers them in many reads.
    assert through.bursts >= through.content_events // 2, through.content_reads
