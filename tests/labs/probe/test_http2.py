"""`labs probe` on an https:// entry that offers h2: the streaming checks over HTTP/2 and HTTP/1.1.

The TLS entry is nginx's fixed TLS config (proxies/fixed/nginx-tls.conf, its certificate the
self-signed one made at run time, so the probe runs with --insecure) in front of the canary.
A fault over HTTP/2 alone is shown with the fake upstream standing in for both protocols' streams
(a paced one for HTTP/1.1, a buffering hop's lump for HTTP/2): no proxy config here buffers one
protocol and not the other.
"""
from __future__ import annotations

import asyncio
import json

from labs.client import measure_stream
from labs.fakes.upstream import fake_upstream
from labs.findings import Verdict
from labs.findings.evidence import untold
from labs.probe import cli, flow, knobs, protocols, run
from tests.labs.probe.chains import chain, urls
from tests.labs.probe.test_skipped import context, reported

INTERVAL_S = knobs.STREAM_INTERVAL_S
STREAMING = ["--check", "buffering", "--check", "coalescing"]


def probed(capsys, *args: str) -> tuple[int, dict]:
    status = cli.main([*args, "--json", *STREAMING])
    return status, json.loads(capsys.readouterr().out)


def test_a_tls_entry_is_measured_over_both_protocols_side_by_side(origin, capsys):
    with chain([("nginx", "fixed-tls", {})], origin.port) as hops:
        assert hops[0].url.startswith("https://")
        status, document = probed(capsys, *urls(hops), "--insecure")
    assert status == 0 and document["ok"] and document["skipped"] == [], document["checks"]
    assert document["findings"] == []
    rows = {row["protocol"]: row for row in document["protocols"]}
    assert {name: row["http_version"] for name, row in rows.items()} == {"HTTP/1.1": "1.1", "HTTP/2": "2"}
    for row in rows.values():
        # Both streamed: every event paced by the origin, about one per read, none of them held.
        assert row["outcome"] == "complete" and row["buffering"] == row["coalescing"] == "no fault", row
        assert row["e2e_s"] - row["ttft_s"] >= 0.8 * (row["content_events"] - 1) * INTERVAL_S
        assert row["events_per_read_mean"] < 1.5 and row["gap_max_s"] < 4 * INTERVAL_S, row
    assert "HTTP/2 and HTTP/1.1" in document["measurements"]["http"]
    assert "picked h2" in document["measurements"]["http"]
    checks = {c["name"]: c for c in document["checks"]}
    assert checks["buffering"]["passed"] and "HTTP/2: no fault either" in checks["buffering"]["observed"]
    h1, h2 = rows["HTTP/1.1"], rows["HTTP/2"]
    print(f"TTFT h1 {h1['ttft_s'] * 1000:.0f} ms, h2 {h2['ttft_s'] * 1000:.0f} ms; events per read "
          f"h1 {h1['events_per_read_mean']:.2f}, h2 {h2['events_per_read_mean']:.2f}; gap max h1 "
          f"{h1['gap_max_s'] * 1000:.0f} ms, h2 {h2['gap_max_s'] * 1000:.0f} ms")


def test_http1_only_and_a_self_signed_certificate(origin, capsys):
    with chain([("nginx", "fixed-tls", {})], origin.port) as hops:
        status, document = probed(capsys, *urls(hops), "--insecure", "--http1-only")
        assert [row["protocol"] for row in document["protocols"]] == ["HTTP/1.1"]
        assert status == 0 and "--http1-only" in document["measurements"]["http"]
        refused, unusable = probed(capsys, *urls(hops))
    assert refused == 2 and "--insecure" in unusable["error"]


def test_an_http_entry_is_measured_over_http11_only(origin, capsys):
    with chain([("nginx", "fixed", {})], origin.port) as hops:
        status, document = probed(capsys, *urls(hops))
    assert status == 0 and [row["protocol"] for row in document["protocols"]] == ["HTTP/1.1"]
    assert "no h2c" in document["measurements"]["http"]


def test_a_fault_over_http2_alone_is_named_as_such(monkeypatch):
    with fake_upstream() as upstream:
        ctx = context(upstream, "/v1/chat/completions?n=21&interval=0.1")
        lump = asyncio.run(measure_stream(upstream.url("/lump?n=21&interval=0.1"), b"{}"))

        async def lumped(ctx, hop):
            return lump
        monkeypatch.setattr(flow, "over_h2", lumped)
        seen = asyncio.run(run.observe(flow.Buffering(), ctx))
        assert seen.fault and seen.observed.startswith("over HTTP/2 only: held to the end"), seen
        assert seen.measurements["only_over"] == "h2" and "the origin sent 21 events" in seen.evidence
        # Asked again through an entry: the HTTP/2 stream is what is re-read there.
        assert asyncio.run(flow.Buffering().shows(ctx, 0, seen))
        [finding] = reported(seen).findings
        assert finding.kind == "buffering" and finding.severity == "failure"
        rows = flow.by_protocol(ctx)
    assert [(row["protocol"], row["buffering"]) for row in rows] == [("HTTP/1.1", "no fault")]


def test_one_verdict_over_both_protocols():
    passed, held = Verdict(False, "streamed"), Verdict(True, "held")
    assert protocols.fold(passed, None) == (passed, False)
    assert protocols.fold(held, passed)[0].observed == "held (over HTTP/1.1 only; HTTP/2: streamed)"
    assert protocols.fold(held, held)[0].fault and not protocols.fold(held, held)[1]
    assert protocols.fold(passed, held) == (Verdict(True, "over HTTP/2 only: held (HTTP/1.1: streamed)"), True)
    silent = protocols.fold(passed, untold("no content arrived (reset)"))[0]
    assert not silent.fault and silent.untold == "over HTTP/2: no content arrived (reset)"
    assert protocols.fold(untold("no content"), held)[0].untold == "no content"
