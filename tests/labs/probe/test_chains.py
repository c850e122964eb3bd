"""`labs probe` through chains of the lab's own proxies: each fault named with its kind and its hop.

Every chain has two hops, one of them faulty (a catalogue variant, its timeouts scaled to about
a second), and the probe runs only the checks the case needs. Each test also asserts what the
finding depends on (the events were paced, the silence passed below the limit and was cut above
it, the client really left...), and a chain of fixed configs must give no finding at all.
"""
from __future__ import annotations

import json

import pytest

from labs.probe import CHECK_NAMES, cli, knobs
from tests.labs.probe.chains import chain, urls
from tests.labs.probe.conftest import MAX_SILENCE_S, MAX_STREAM_S, probe

SCALED_LIMIT_S = 1.0  # the faulty hops' timeouts below
WITHIN = 0.15  # an idle limit is found to within ~10 %; 15 % leaves room for a noisy machine


def the_finding(report, kind: str, hop: int):
    """The report's failures are all of `kind`, at `hop`; returns the first."""
    failures = report.failures()
    assert failures, f"no failure found: {[c.to_json() for c in report.checks]}"
    assert {(f.kind, f.hop) for f in failures} == {(kind, hop)}, [f.to_json() for f in failures]
    assert not report.ok and report.exit_status == 1
    assert all(f.scenario and f.fix for f in failures)
    return failures[0]


def test_buffering_is_named_at_the_inner_hop(origin, capsys):
    with chain([("envoy", "fixed", {}), ("nginx", "nginx-buffering:broken", {})], origin.port) as hops:
        status = cli.main([*urls(hops), "--json", "--check", "buffering", "--check", "coalescing"])
    document = json.loads(capsys.readouterr().out)
    assert status == 1
    assert document["origin"] == "streamlab" and document["ok"] is False
    assert [f["kind"] for f in document["findings"]] == ["buffering"]
    finding = document["findings"][0]
    assert set(finding) >= {"kind", "severity", "hop", "evidence", "limit_s"}
    assert finding["hop"] == 1 and finding["severity"] == "failure"
    # Both entries show the lump; the one in front only passed it along.
    assert document["measurements"]["hops"]["buffering"] == {"0": True, "1": True}
    # What it depends on: the origin paced its events (the stream lasted its script), and they
    # still came in a couple of reads; coalescing is not reported on top of it.
    stream = document["measurements"]["buffering"]["identity"]
    interval = knobs.STREAM_INTERVAL_S
    assert stream["e2e_s"] >= 0.8 * (stream["content_events"] - 1) * interval
    assert stream["events_per_read_max"] >= 4
    assert next(c for c in document["checks"] if c["name"] == "coalescing")["passed"]


def test_coalescing_at_the_inner_hop(origin):
    with chain([("nginx", "fixed", {}), ("haproxy", "haproxy-nodelay:broken", {})], origin.port) as hops:
        report, _ = probe(urls(hops), ["coalescing", "buffering"])
    the_finding(report, "coalescing", 1)
    stream = report.measurements["buffering"]["identity"]
    assert stream["outcome"] == "complete" and stream["events_per_read_mean"] >= 1.5


def test_compression_delay_at_the_outer_hop(origin):
    # HAProxy 2.6's gzip holds the first events; 3.2's flushes each (docs/field-notes.md).
    with chain([("haproxy", "haproxy-compression:broken", {"version": "2.6"}), ("envoy", "fixed", {})],
               origin.port) as hops:
        report, _ = probe(urls(hops), ["buffering", "compression-delay"])
    finding = the_finding(report, "compression-delay", 0)
    assert "gzip" in finding.evidence
    # Uncompressed, the same path streams: it is the compression that holds the events.
    assert report.measurements["compression-delay"]["gzip"]["content_encoding"] == "gzip"
    assert next(c for c in report.checks if c.name == "buffering").passed


def test_idle_timeout_before_and_after_the_headers(origin):
    faulty = ("haproxy", "haproxy-timeout-server:broken", {"timeout_server": f"{SCALED_LIMIT_S:g}s"})
    with chain([("nginx", "fixed", {}), faulty], origin.port) as hops:
        report, _ = probe(urls(hops), ["idle-timeout"])
    the_finding(report, "idle-timeout", 1)
    by_check = {c.name: report.finding_for(c.name) for c in report.checks}
    assert set(by_check) == {"idle-timeout-before-headers", "idle-timeout-after-headers",
                             "idle-timeout-mid-stream"}
    for name, finding in by_check.items():
        assert finding is not None, name
        assert abs(finding.limit_s - SCALED_LIMIT_S) <= WITHIN * SCALED_LIMIT_S, (name, finding.limit_s)
        tries = report.measurements[name]["tries"]
        # What it depends on: a silence under the limit passed and one over it was cut.
        assert any(t["passed"] and t["silence_s"] < finding.limit_s for t in tries), tries
        assert any(not t["passed"] and t["silence_s"] > finding.limit_s for t in tries), tries
    # Before the headers the path answers with an error status; after them it cuts a 200.
    assert "HTTP 504" in by_check["idle-timeout-before-headers"].evidence
    assert "HTTP 200 already sent" in by_check["idle-timeout-mid-stream"].evidence


def test_total_timeout_with_a_scaled_route_timeout(origin):
    faulty = ("envoy", "envoy-route-timeout:broken", {"route_timeout": f"{SCALED_LIMIT_S:g}s"})
    with chain([("nginx", "fixed", {}), faulty], origin.port) as hops:
        report, _ = probe(urls(hops), ["total-timeout"])
    finding = the_finding(report, "total-timeout", 1)
    assert abs(finding.limit_s - SCALED_LIMIT_S) <= 0.25 * SCALED_LIMIT_S
    measured = report.measurements["total-timeout"]
    # The stream asked for was longer than --max-stream, and was never silent (heartbeats).
    assert measured["duration_s"] > MAX_STREAM_S
    assert measured["stream"]["heartbeats"] >= 1 and measured["stream"]["status"] == 200


def test_disconnect_not_propagated_at_the_outer_hop(origin):
    with chain([("haproxy", "haproxy-abortonclose:broken", {}), ("nginx", "fixed", {})], origin.port) as hops:
        report, _ = probe(urls(hops), ["disconnect-not-propagated"])
    the_finding(report, "disconnect-not-propagated", 0)
    measured = report.measurements["disconnect-not-propagated"]
    # The client really left early, and the origin's own record says it noticed a pause later.
    assert measured["events_received"] == knobs.LEAVE_AFTER_EVENTS
    assert measured["record"]["outcome"] == "client-gone"
    assert measured["origin_saw_departure_after_s"] >= 0.5 * measured["pause_s"]


def test_connection_limit_at_the_inner_hop(origin):
    with chain([("nginx", "fixed", {}), ("envoy", "envoy-circuit-breaker:broken", {})], origin.port) as hops:
        report, _ = probe(urls(hops), ["connection-limit"], streams=20)
    finding = the_finding(report, "connection-limit", 1)
    assert "503" in finding.evidence
    measured = report.measurements["connection-limit"]
    assert measured["streams"] == 20 and measured["outcomes"].get("complete", 0) >= 1


def test_a_chain_of_fixed_configs_gives_no_finding(origin):
    fixed = [("envoy", "fixed", {}), ("haproxy", "fixed", {}), ("nginx", "fixed", {})]
    with chain(fixed, origin.port) as hops:
        report, _ = probe(urls(hops), None, streams=20)
    assert report.findings == [], [f.to_json() for f in report.findings]
    assert report.ok and report.exit_status == 0
    # Every check ran (none skipped): a clean verdict that measured nothing would prove nothing.
    assert [c.name for c in report.checks] == list(CHECK_NAMES)
    assert all(c.passed and not c.skipped for c in report.checks), [c.to_json() for c in report.checks]
    departure = report.measurements["disconnect-not-propagated"]
    assert departure["origin_saw_departure_after_s"] < 0.5 * departure["pause_s"]


@pytest.mark.parametrize("args, message", [
    (["ftp://127.0.0.1/v1"], "not an http"),
    (["http://127.0.0.1:1/v1"], "cannot list the models"),
    (["http://127.0.0.1:8080/v1", "--max-silence", "0"], "--max-silence must be above 0"),
    (["http://127.0.0.1:8080/v1", "--check", "nope"], "no probe check named 'nope'"),
])
def test_unusable_input_exits_2_with_the_reason(args, message, capsys):
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_the_budget_bounds_the_run_and_skips_what_does_not_fit(origin):
    budget_s = 6.0
    with chain([("nginx", "fixed", {})], origin.port) as hops:
        report, wall = probe(urls(hops), None, budget_s=budget_s)
    assert wall <= budget_s + 2.0  # + asking who the origin is, and the last stream's end
    skipped = [c for c in report.checks if c.skipped]
    assert skipped and all("budget" in c.skipped for c in skipped)
    # Running out of time is no finding: a cut the probe made itself must not count as the path's.
    assert report.findings == [] and report.ok
