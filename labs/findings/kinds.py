"""The finding kinds, declared once: each with its id, its words, its judge and its scenario.

Every command (`labs verify`, `labs probe`, `labs load`), the JSON they write, the pytest plugin
and the catalogue name a fault by one of these ids. `judge` is the kind's one decision over what a
tool measured (`labs.findings.evidence`), its thresholds beside it in its own module; `scenario` is
the catalogue scenario a finding of the kind points a reader to (`make lab-NAME`), and whose guard
runs this very judge on the real broken and fixed paths (`checks.finding(kind)`).
"""
from __future__ import annotations

from dataclasses import dataclass

from labs.findings import (buffering, coalescing, compression, connection_limit, departure,
                           idle_timeout, total_timeout)
from labs.findings.evidence import Judge

# One of KINDS' ids (a plain string: the table below is the one list of them).
FindingKind = str


@dataclass(frozen=True)
class Kind:
    id: FindingKind
    words: str  # the fault as a reader sees it
    judge: Judge
    scenario: str


KINDS: tuple[Kind, ...] = (
    Kind("buffering", "events held: TTFT near E2E, many events per read", buffering.judge,
         "nginx-buffering"),
    Kind("coalescing", "events grouped into fewer reads than the server sent", coalescing.judge,
         "haproxy-nodelay"),
    Kind("compression-delay", "compression holds each event back", compression.judge, "nginx-gzip"),
    Kind("idle-timeout", "a silence longer than the limit ends the stream", idle_timeout.judge,
         "nginx-read-timeout"),
    Kind("total-timeout", "a whole-response limit cuts long answers", total_timeout.judge,
         "envoy-route-timeout"),
    Kind("disconnect-not-propagated", "the server keeps generating after the client left",
         departure.judge, "nginx-client-abort"),
    Kind("connection-limit", "streams refused, reset or queued beyond a count", connection_limit.judge,
         "nginx-worker-connections"),
)
BY_ID: dict[FindingKind, Kind] = {kind.id: kind for kind in KINDS}
FINDING_KINDS: tuple[FindingKind, ...] = tuple(BY_ID)
