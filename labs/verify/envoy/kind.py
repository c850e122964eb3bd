"""Envoy, as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.envoy import config, read, rewrite, rules, versions
from labs.verify.kind import ConfigKind
from labs.verify.model import Reading, RouteWanted
from labs.verify.rewrite import Rewritten, assert_loopback


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    # Envoy runs as whoever starts it and names no user: nothing differs in a container.
    _, data = config.load(path)
    chosen = read.select_route(data, path, reading.wanted.at(reading.path, reading.host))
    chains = chosen.listener.items_list("filter_chains")
    index = next((at for at, chain in enumerate(chains) if chain is chosen.chain), None)
    rewritten = rewrite.rewrite(path, chosen.listener.get("name"), lab_port, folder, index)
    rewritten.host_header = reading.host  # the domain the chosen virtual host matches
    assert_loopback(rewrite.addresses(rewritten.files[str(path)][1]))
    rewritten.write()
    return rewritten


KIND = ConfigKind(
    proxy="envoy", example="envoy.yaml",
    shape=re.compile(r"^\s*(static_resources|admin|dynamic_resources|node)\s*:", re.M),
    read=read.read, suspicions=rules.suspicions, run_here=run_here, defaults=versions.TABLE,
    fallback={
        "buffering": ("http_filters", "no filter that needs the whole response body"),
        "coalescing": ("http_filters", "no filter that holds response data"),
        "compression-delay": ("http_filters", "compressor content_type without text/event-stream"),
        "idle-timeout": ("stream_idle_timeout", "stream_idle_timeout above the longest silence"),
        "total-timeout": ("route timeout", "timeout: 0s on the streaming route"),
        "disconnect-not-propagated": ("http_filters", "no filter that holds the upstream request"),
        "connection-limit": ("max_requests", "circuit-breaker thresholds above the concurrent streams"),
    })
