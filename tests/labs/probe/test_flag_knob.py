"""The probe's canary set up by flags shows every fault its knobs show (issue 40, item 7).

The probe asks the canary, per request, for the settings that expose faults
(labs.lab.exposing). For every finding kind, one faulty hop of the kind (the hops
tests/labs/probe/test_chains.py names, alone here) is probed two ways: the canary as docs/probe.md
runs it with those settings in every request, and a canary given them as its own flags with none
in the requests. Both must name the kind at the hop.
"""
from __future__ import annotations

import pytest

from labs.findings.kinds import KINDS
from labs.probe import knobs
from labs.lab import exposing
from tests.labs.probe.chains import canary, chain, urls
from tests.labs.probe.conftest import probe

pytestmark = pytest.mark.slow
SCALED_LIMIT_S = 1.0  # the scaled timeouts, as in test_chains.py

FAULTY = {
    "buffering": ("nginx", "nginx-buffering:broken", {}),
    "coalescing": ("haproxy", "haproxy-nodelay:broken", {}),
    # HAProxy 2.6's gzip holds the first events; 3.2's flushes each (docs/field-notes.md).
    "compression-delay": ("haproxy", "haproxy-compression:broken", {"version": "2.6"}),
    "idle-timeout": ("haproxy", "haproxy-timeout-server:broken",
                     {"timeout_server": f"{SCALED_LIMIT_S:g}s"}),
    "total-timeout": ("envoy", "envoy-route-timeout:broken", {"route_timeout": f"{SCALED_LIMIT_S:g}s"}),
    "disconnect-not-propagated": ("haproxy", "haproxy-abortonclose:broken", {}),
    "connection-limit": ("envoy", "envoy-circuit-breaker:broken", {}),
}
# The idle timeout is looked for at one place: the three places are the same limit three times.
CHECKS = {"idle-timeout": ["idle-timeout-mid-stream"]}


@pytest.fixture(scope="module")
def flag_canary():
    with canary(exposing.exposing_flags()) as server:
        yield server


def test_every_kind_has_a_faulty_hop() -> None:
    assert set(FAULTY) == {kind.id for kind in KINDS}


def _found(origin, kind: str) -> tuple[set[str], list]:
    with chain([FAULTY[kind]], origin.port) as hops:
        report, _ = probe(urls(hops), CHECKS.get(kind, [kind]), streams=20)
    return {f.kind for f in report.failures()}, [c.to_json() for c in report.checks]


@pytest.mark.parametrize("kind", list(FAULTY))
def test_the_flag_canary_shows_what_the_knob_canary_shows(origin, flag_canary, monkeypatch, kind):
    by_knob, seen = _found(origin, kind)
    assert kind in by_knob, seen
    monkeypatch.setattr(exposing, "EXPOSING", {})
    assert not {"omit_headers", "heartbeat_s"} & set(knobs.stream_body("tiny")["lab"])
    by_flag, seen = _found(flag_canary, kind)
    assert kind in by_flag, seen


def test_the_flag_canary_has_the_settings_itself(origin, flag_canary):
    """What the comparison depends on: asked nothing, the flag canary leaves the header out (and
    the usual canary sends it, so there the requests' knobs do it)."""
    import httpx

    plain = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
             "max_tokens": 2}
    sent = {name: httpx.post(server.url + "/v1/chat/completions", json=plain, timeout=10).headers
            for name, server in (("flag", flag_canary), ("knob", origin))}
    assert "x-accel-buffering" not in sent["flag"] and sent["knob"]["x-accel-buffering"] == "no"
