"""The load lab's server set-up cannot hide the one fault it names (issue 40, item 7).

The load lab starts its server with flags (labs/load/paths.py ServerSpec: uvicorn's default
httptools, no exposing settings) and judges a step by its connections (labs/load/analysis.py,
the connection-limit kind's waves). nginx with `worker_connections 64` (the catalogue's
nginx-worker-connections) is loaded with 60 streams three ways: as the load lab runs; with the
exposing settings (labs.lab.exposing) in every request; and with them as the server's own
flags on a close-delimited server. Each way must name nginx's worker_connections: neither the
framing nor the exposing settings decide a connection limit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import httpx
import pytest

from labs.load import SYNTHETIC, LoadLab, LoadPath, ServerSpec, diagnose
from labs.lab import exposing

pytestmark = pytest.mark.slow
STREAMS = 60  # each holds two of nginx's 64 connections: about half are refused
BROKEN = LoadPath("nginx-64", "broken", "worker_processes 1; worker_connections 64", proxy="nginx",
                  overrides={"worker_processes": 1, "worker_connections": 64})


@dataclass(frozen=True)
class FlaggedSpec(ServerSpec):
    """The load lab's server with the exposing settings as its own flags, answering close-delimited."""

    def args(self) -> list[str]:
        return [*super().args(), *exposing.CLOSE_DELIMITED, *exposing.exposing_flags()]


@pytest.fixture(scope="module")
def lab() -> Iterator[LoadLab]:
    with LoadLab(duration_s=1.0) as running:
        yield running


WAYS: dict[str, tuple[ServerSpec, dict[str, Any]]] = {
    "as the load lab runs": (SYNTHETIC, {}),
    "exposing knobs": (SYNTHETIC, exposing.EXPOSING),
    "exposing flags, close-delimited": (FlaggedSpec(), {}),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_every_way_names_the_connection_limit(lab: LoadLab, way: str) -> None:
    spec, lab_fields = WAYS[way]
    server = lab.server(spec)
    # The server is the one this way says: asked nothing, the flagged one leaves the header out.
    plain = {"model": lab.model, "messages": [{"role": "user", "content": "hi"}], "stream": True,
             "max_tokens": 2}
    sent = httpx.post(server.url + "/v1/chat/completions", json=plain, timeout=10).headers
    assert ("x-accel-buffering" in sent) == (not isinstance(spec, FlaggedSpec))
    with lab.proxy(BROKEN, server.port) as proxy:
        step = lab.run_step(BROKEN, STREAMS, server, proxy, extra_lab=lab_fields)
    # What it depends on: the streams were all asked for, and some were refused.
    assert step.concurrency == STREAMS and step.failed > 0, step.outcomes
    assert "nginx worker_connections" in [limit.name for limit in diagnose(step)], step.outcomes
