"""Each entry of the platforms' table (labs/probe/platforms.py) reproduced: its cut, at the table's
number scaled down (SCALE, the long ones to LONGEST_SCALED_S), through a real proxy's own setting of the same kind, and the probe
names it.

An idle limit is nginx's proxy_read_timeout, which counts a silence in every position (before
the headers, after them, mid-stream); a limit on the whole response is Envoy's route timeout.
Entries sharing a kind and a number share one proxy run, and the silences before and after the
headers run in it, so each assertion has both directions: the probe names the entry at the positions it documents (its
measured limit / SCALE matches the number), and at the others names nothing of it. No real proxy
has a limit only before the first byte or only after it (Heroku's 30 s and 55 s, Azure's 230 s,
Railway's 300 s): the same nginx timer shows them at their positions, and the position filter is
what the other positions assert. The clients' limits (Codex, undici, LibreChat) are never named
from a measurement; test_platforms.py checks that the heartbeat advice carries them.

The idle runs go through nginx's TLS listener, so the after-headers silence is also tried over
HTTP/2: Cloudflare's entry through nginx 1.22.1, which holds the response headers until the
first body byte over HTTP/2 as Cloudflare does (the held headers are named), every other through
the current nginx, which holds nothing (none are).
"""
from __future__ import annotations

import pytest

from labs.probe import held_headers, platforms
from tests.labs.probe.chains import chain, urls
from tests.labs.probe.conftest import probe

# The scale: 15 s becomes 0.6 s. Smaller, a loaded machine's 0.1 s of timer lag (measured at load 9:
# a 0.6 s proxy_read_timeout read as 0.45 s mid-stream) passes the 10 % slack. The long limits are
# scaled further, to LONGEST_SCALED_S: a run is tries of 1.2, 0.9, 1.1 x the scaled limit in two
# positions, so 300 s at 1/25 (12 s) made a run of a minute, and 3 s keeps the 10 % slack 0.3 s.
SCALE = 1 / 25
LONGEST_SCALED_S = 3.0
OVER = 1.2  # --max-silence / --max-stream over the scaled limit: the first try is cut


def scale_of(limit_s: float) -> float:
    return min(SCALE, LONGEST_SCALED_S / limit_s)
GROUPS = sorted({(e.kind, e.limit_s) for e in platforms.PLATFORMS})
# Before and after the headers: every entry documents one of them and not (or also) the other,
# so both directions are asserted. Mid-stream (tests/labs/probe/test_chains.py) reads the cut
# from the last token the client saw, late by the machine's delivery lag: at load 13 on 2 cores
# a 1.2 s proxy_read_timeout read as 1.04 s mid-stream, 1.20 s before the headers.
IDLE_POSITIONS = ("before-headers", "after-headers")
HOLDS_HEADERS = "1.22"  # the lab's oldest nginx: HTTP/2 headers wait for the first DATA frame


def proxy_for(kind: str, limit_s: float, holds_headers: bool):
    scaled_ms = round(limit_s * scale_of(limit_s) * 1000)
    if kind == "idle-timeout":
        version = {"version": HOLDS_HEADERS} if holds_headers else {}
        return ("nginx", "fixed-tls", {"proxy_read_timeout": f"{scaled_ms}ms", **version})
    return ("envoy", "fixed", {"route_timeout": f"{scaled_ms / 1000:.3f}s"})


def group(kind: str, limit_s: float):
    return pytest.param(kind, limit_s, id=f"{kind}-{limit_s:g}s")


@pytest.mark.parametrize("kind, limit_s", [group(*g) for g in GROUPS])
def test_the_probe_names_each_entry_from_its_scaled_cut(origin, kind, limit_s):
    entries = [e for e in platforms.PLATFORMS if (e.kind, e.limit_s) == (kind, limit_s)]
    holds = any(e.holds_headers for e in entries)
    scale = scale_of(limit_s)
    scaled = limit_s * scale
    checks = [f"idle-timeout-{p}" for p in IDLE_POSITIONS] if kind == "idle-timeout" else ["total-timeout"]
    with chain([proxy_for(kind, limit_s, holds)], origin.port) as hops:
        report, _ = probe(urls(hops), checks, max_silence_s=OVER * scaled, max_stream_s=OVER * scaled,
                          insecure=True)
    # Every entry is documented at one position measured here at least (the positive direction).
    assert all(kind == "total-timeout" or set(e.positions) & set(IDLE_POSITIONS) for e in entries)
    for check in checks:
        finding = report.finding_for(check)
        assert finding is not None, (check, [c.to_json() for c in report.checks])
        unscaled = finding.limit_s / scale
        position = check.removeprefix("idle-timeout-") if kind == "idle-timeout" else None
        held = report.measurements[check].get(held_headers.KEY)
        # The probe's naming, given the cut unscaled (the report names from the scaled number:
        # test_platforms.py shows its hints are the same function's).
        hints = platforms.hints(kind, position, unscaled, bool(held))
        named = {hint.split(":", 1)[0] for hint in hints}
        for entry in entries:
            documented_here = kind == "total-timeout" or position in entry.positions
            # The precondition: the measured cut, unscaled, is the entry's number.
            assert entry.matches(kind, position, unscaled) == documented_here, (check, unscaled)
            assert (entry.platform in named) == documented_here, (check, unscaled, named)
        # Nothing of another kind is named (a total limit of the same number, an idle one).
        others = {e.platform for e in platforms.PLATFORMS if e.kind != kind} - {e.platform for e in entries}
        assert not named & others, named
        if kind == "idle-timeout":
            # Its fixes end with the heartbeat the path and its clients need.
            assert finding.fix.endswith(platforms.heartbeat_advice(finding.limit_s))
        if position == "after-headers" and holds:
            # Over HTTP/1.1 the 200 came at once (no try held); over HTTP/2 only with the cut.
            assert all(not t["held"] for t in report.measurements[check]["tries"])
            assert held and held["protocol"] == "HTTP/2", report.measurements[check]
            assert held["headers_s"] >= held_headers.HELD_SHARE * held["end_s"], held
            assert finding.evidence.count("holds the response headers until the first body byte") == 1
            assert finding.fix.startswith(held_headers.FIX)
            assert any(h.endswith("as seen here") for h in hints if h.startswith("Cloudflare")), hints
            print(f"held over HTTP/2: headers at {held['headers_s']:.3f} s, cut at {held['end_s']:.3f} s")
        else:
            assert held is None and held_headers.FIX not in (finding.fix or ""), (check, held)
        print(f"{check}: scaled limit {scaled:.2f} s, measured {finding.limit_s:.3f} s "
              f"(x{1 / scale:g} = {unscaled:.1f} s): {sorted(named)}")


def test_held_headers_seen_over_http2_alone_name_no_hop_an_http_entry_cannot_show(origin):
    """The hold of nginx 1.22 over HTTP/2, in front of an http:// entry: that entry cannot be asked
    over HTTP/2 (no h2c), so the finding names no hop rather than clearing or blaming it."""
    holding = ("nginx", "fixed-tls", {"version": HOLDS_HEADERS, "proxy_read_timeout": "1s"})
    with chain([holding, ("nginx", "fixed", {})], origin.port) as hops:
        report, _ = probe(urls(hops), ["idle-timeout-after-headers"], max_silence_s=1.2, insecure=True)
    finding = report.finding_for("idle-timeout-after-headers")
    assert finding is not None and finding.hop is None, [c.to_json() for c in report.checks]
    assert report.measurements["idle-timeout-after-headers"][held_headers.KEY]["protocol"] == "HTTP/2"
    # The inner entry was asked (and could not tell), the outer one showed it.
    assert report.measurements["hops"]["idle-timeout-after-headers"] == {"0": True}
