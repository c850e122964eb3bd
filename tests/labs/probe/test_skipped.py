"""A probe check that could not measure is skipped with the reason: never a pass, never a finding.

Each check runs against the lab's fake upstream (labs/fakes), which plays a path whose stream did
not happen as the check asked: a hop holding the whole long stream, an origin that ignores the
silence it was asked for, a stream with no content, a burst kept below its count, a check that
raised. The report then says the check was skipped, and how many were (terminal and JSON), with
exit status 0 still meaning "no failure found".
"""
from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass
from typing import Iterator

import pytest
from rich.console import Console

from labs.fakes.upstream import FakeUpstream, fake_upstream
from labs.probe import burst, run, silence
from labs.probe.base import Budget, Context, Observation, Settings
from labs.probe.path import Path
from labs.probe.report import ProbeReport, print_report


@dataclass
class ShapedPath(Path):
    """A canary-like path whose streams are one of the fake upstream's shapes."""

    shape: str = "/v1/chat/completions"

    def completions(self, hop: int = 0) -> str:
        return self.urls[hop].removesuffix("/v1") + self.shape


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with fake_upstream() as up:
        yield up


def context(upstream: FakeUpstream, shape: str, **settings: object) -> Context:
    path = ShapedPath(urls=[upstream.base_url + "/v1"], model="m", origin="streamlab", shape=shape)
    return Context(path, Settings(**settings), Budget(60))  # type: ignore[arg-type]


def observe(check: object, ctx: Context) -> Observation:
    return asyncio.run(run.observe(check, ctx))


def reported(*seen: Observation) -> ProbeReport:
    report = ProbeReport(urls=["http://127.0.0.1:1/v1"], origin="streamlab")
    for one in seen:
        report.add(one, None, None)
    return report


def assert_skipped(seen: Observation, because: str) -> None:
    outcome = reported(seen).checks[0]
    assert not seen.fault and seen.skipped and because in seen.skipped, seen
    assert outcome.skipped == seen.skipped and not outcome.passed, outcome


def test_a_long_stream_a_hop_held_whole_is_skipped_not_passed(upstream, monkeypatch):
    # The hop holds the 1.05 s stream to its end; the client gives up after 0.3 s of nothing
    # (the probe's slack, scaled down from 5 s so the test takes a fraction of a second).
    monkeypatch.setattr(silence, "CLIENT_SLACK_S", 0.3)
    ctx = context(upstream, "/lump?n=7&interval=0.15", max_stream_s=0.5)
    seen = observe(silence.TotalTimeout(), ctx)
    assert_skipped(seen, "went silent")
    assert seen.measurements["stream"]["outcome"] == "timeout"
    assert "total_limit_s" not in ctx.notes  # no limit caps the silences after it


def test_a_silence_the_origin_did_not_keep_is_skipped_not_passed(upstream):
    # The fake's paced stream ignores the mid-stream pause it is asked for: 20 events 20 ms apart.
    seen = observe(silence.IdleTimeout("mid-stream"), context(upstream, "/v1/chat/completions",
                                                              max_silence_s=0.8))
    assert_skipped(seen, "did not happen")
    [attempt] = seen.measurements["tries"]
    assert attempt["untold"] and not attempt["passed"]


def test_a_stream_without_content_is_skipped_by_the_flow_checks(upstream):
    ctx = context(upstream, "/v1/chat/completions?n=0")
    for check in run.PHASES[0][0][:2]:  # buffering, coalescing
        assert_skipped(observe(check, ctx), "no content arrived")


def test_a_burst_kept_below_its_count_is_skipped_when_it_shows_nothing(upstream):
    ctx = context(upstream, "/v1/chat/completions?n=5&interval=0.02", streams=4)
    ctx.path.slots = 2  # the fake's records are not readable: the burst is kept to the slots
    seen = observe(burst.ConnectionLimit(), ctx)
    assert_skipped(seen, "2 of the 4 streams")
    assert seen.measurements["streams"] == 2


def test_a_check_that_raised_is_skipped_with_the_error(upstream, monkeypatch):
    async def broken(self: object, ctx: Context, hop: int) -> Observation:
        raise RuntimeError("the record was not JSON")
    monkeypatch.setattr(burst.ConnectionLimit, "observe", broken)
    seen = observe(burst.ConnectionLimit(), context(upstream, "/v1/chat/completions"))
    assert_skipped(seen, "RuntimeError: the record was not JSON")


def test_the_report_counts_the_skipped_checks_beside_the_ok():
    report = reported(Observation("buffering", "buffering", False, "streamed"),
                      Observation("total-timeout", "total-timeout", False, "not measured: silent",
                                  skipped="the stream went silent"))
    # No failure, but not everything was measured: inconclusive (exit 2), never "ok".
    assert not report.ok and report.verdict == "inconclusive" and report.exit_status == 2
    document = report.to_json()
    assert document["skipped"] == ["total-timeout"]
    assert [c["passed"] for c in document["checks"]] == [True, False]
    assert document["checks"][1]["skipped"] == "the stream went silent"
    text = io.StringIO()
    print_report(report, Console(file=text, width=200, color_system=None))
    printed = text.getvalue()
    assert "skipped" in printed.split("total-timeout", 1)[1].splitlines()[0]
    assert "1 check(s) skipped (not measured)" in printed.splitlines()[-1]
    json.dumps(document)
