"""Each entry of the platforms' table (labs/probe/platforms.py) reproduced: its cut, at the table's
number scaled down by SCALE, through a real proxy's own setting of the same kind, and the probe
names it.

An idle limit is nginx's proxy_read_timeout, which counts a silence in every position (before
the headers, after them, mid-stream); a limit on the whole response is Envoy's route timeout.
Entries sharing a kind and a number share one proxy run, and all three silences run in it, so
each assertion has both directions: the probe names the entry at the positions it documents (its
measured limit / SCALE matches the number), and at the others names nothing of it. No real proxy
has a limit only before the first byte or only after it (Heroku's 30 s and 55 s, Azure's 230 s,
Railway's 300 s): the same nginx timer shows them at their positions, and the position filter is
what the other positions assert. The clients' limits (Codex, undici, LibreChat) are never named
from a measurement; their test is that the heartbeat advice carries them.
"""
from __future__ import annotations

import pytest

from labs.probe import held_headers, platforms
from labs.probe.silence import POSITIONS
from tests.labs.probe.chains import chain, urls
from tests.labs.probe.conftest import probe

SCALE = 1 / 50  # a 300 s limit becomes 6 s, Envoy's 15 s becomes 0.3 s
# Just over the scaled limit: the first silence is cut, the next two bracket the limit.
OVER = 1.2
GROUPS = sorted({(e.kind, e.limit_s) for e in platforms.PLATFORMS})


def proxy_for(kind: str, limit_s: float):
    scaled_ms = round(limit_s * SCALE * 1000)
    if kind == "idle-timeout":
        return ("nginx", "fixed", {"proxy_read_timeout": f"{scaled_ms}ms"})
    return ("envoy", "fixed", {"route_timeout": f"{scaled_ms / 1000:.3f}s"})


@pytest.mark.parametrize("kind, limit_s", GROUPS, ids=[f"{k}-{n:g}s" for k, n in GROUPS])
def test_the_probe_names_each_entry_from_its_scaled_cut(origin, kind, limit_s):
    entries = [e for e in platforms.PLATFORMS if (e.kind, e.limit_s) == (kind, limit_s)]
    scaled = limit_s * SCALE
    with chain([proxy_for(kind, limit_s)], origin.port) as hops:
        report, _ = probe(urls(hops), [kind], max_silence_s=OVER * scaled, max_stream_s=OVER * scaled)
    checks = [f"idle-timeout-{p}" for p in POSITIONS] if kind == "idle-timeout" else ["total-timeout"]
    for check in checks:
        finding = report.finding_for(check)
        assert finding is not None, (check, [c.to_json() for c in report.checks])
        unscaled = finding.limit_s / SCALE
        position = check.removeprefix("idle-timeout-") if kind == "idle-timeout" else None
        # The probe's naming, given the cut unscaled (the report names from the scaled number:
        # tests/labs/probe/test_platforms.py shows its hints are the same function's).
        held = bool(report.measurements[check].get(held_headers.KEY))
        named = {hint.split(":", 1)[0] for hint in platforms.hints(kind, position, unscaled, held)}
        for entry in entries:
            documented_here = kind == "total-timeout" or position in entry.positions
            # The precondition: the measured cut, unscaled, is the entry's number.
            assert entry.matches(kind, position, unscaled) == documented_here, (check, unscaled)
            assert (entry.platform in named) == documented_here, (check, unscaled, named)
        # Nothing of another kind is named (a total limit of the same number, an idle one).
        others = {e.platform for e in platforms.PLATFORMS if e.kind != kind} - {e.platform for e in entries}
        assert not named & others, named
        assert all(e.platform not in named for e in platforms.CLIENTS)
        if kind == "idle-timeout":
            # Its fixes end with the heartbeat the path and its clients need.
            assert finding.fix.endswith(platforms.heartbeat_advice(finding.limit_s))
        print(f"{check}: scaled limit {scaled:.3f} s, measured {finding.limit_s:.3f} s "
              f"(x{1 / SCALE:g} = {unscaled:.1f} s): {sorted(named)}")


def test_headers_held_until_the_first_byte_are_named_with_the_cut(origin):
    """nginx 1.22.1 (the lab's oldest) over HTTP/2 holds the response headers until the first body
    byte, as Cloudflare does; its proxy_read_timeout at Cloudflare's 125 s scaled is the cut. The
    origin sends its headers and then nothing: over HTTP/1.1 they come at once and the cut is a
    plain idle cut; over HTTP/2 they come only with the cut, and the finding says so."""
    scaled = 125 * SCALE
    holding = ("nginx", "fixed-tls", {"version": "1.22", "proxy_read_timeout": f"{round(scaled * 1000)}ms"})
    with chain([holding], origin.port) as hops:
        report, _ = probe(urls(hops), ["idle-timeout-after-headers"], max_silence_s=OVER * scaled, insecure=True)
    finding = report.finding_for("idle-timeout-after-headers")
    assert finding is not None, [c.to_json() for c in report.checks]
    measured = report.measurements["idle-timeout-after-headers"]
    held = measured[held_headers.KEY]
    # The precondition: over HTTP/1.1 the same silence was cut with its 200 at once (no hold).
    assert all(not t["held"] for t in measured["tries"]), measured["tries"]
    assert held["protocol"] == "HTTP/2" and held["headers_s"] >= held_headers.HELD_SHARE * held["end_s"], held
    assert finding.evidence.count("holds the response headers until the first body byte") == 1
    assert report.checks[0].observed.startswith("headers held until the first body byte")
    assert finding.fix.startswith(held_headers.FIX)
    unscaled = finding.limit_s / SCALE
    cloudflare, = platforms.hints("idle-timeout", "after-headers", unscaled, held_headers=True)
    assert cloudflare.startswith("Cloudflare") and cloudflare.endswith("as seen here"), cloudflare
    print(f"held over HTTP/2: headers at {held['headers_s']:.3f} s, cut at {held['end_s']:.3f} s; "
          f"limit {finding.limit_s:.3f} s (x{1 / SCALE:g} = {unscaled:.1f} s)")


def test_a_current_nginx_over_http2_holds_nothing(origin):
    """The other direction: nginx 1.30 sends its HTTP/2 headers at once, so the same cut is a
    plain idle cut."""
    scaled = 125 * SCALE
    current = ("nginx", "fixed-tls", {"proxy_read_timeout": f"{round(scaled * 1000)}ms"})
    with chain([current], origin.port) as hops:
        report, _ = probe(urls(hops), ["idle-timeout-after-headers"], max_silence_s=OVER * scaled, insecure=True)
    finding = report.finding_for("idle-timeout-after-headers")
    assert finding is not None and "holds the response headers" not in finding.evidence
    assert held_headers.KEY not in report.measurements["idle-timeout-after-headers"]
    assert not finding.fix.startswith(held_headers.FIX)
