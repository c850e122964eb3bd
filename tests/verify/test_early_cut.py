"""A stream through the path that ends with a 200 a few ms after it started (Traefik 3.7's default
proxy does it to a few POST streams in a thousand: docs/field-notes.md#traefiks-early-cut) is
measured once more, so the trial's judge reads a whole stream, and the cut is reported all the
same: a failed check ("1 of 2 tries cut N ms after the headers", total-timeout), never a note
beside an exit 0, in every trial, concurrent-streams' burst included (never a connection-limit).
The path that cuts is the lab's fake upstream (`/flaky`: every=N cuts the first of every N
requests)."""
from __future__ import annotations

import asyncio

import pytest

from labs.client.results import Event, StreamResult
from labs.fakes.upstream import fake_upstream
from labs.findings import CheckOutcome
from labs.verify import judge, trials
from labs.verify.early_cut import CUT_KIND, EARLY_CUT_S
from labs.verify.model import Options, Suspicion, VerifyReport


def result(outcome: str = "truncated", events: int = 1, end_s: float = 0.006, status: int = 200) -> StreamResult:
    return StreamResult(status=status, outcome=outcome, headers_s=0.002, end_s=end_s,
                        events=[Event(t=0.003 + i * 0.001, read=i, kind="content") for i in range(events)])


@pytest.mark.parametrize("shape, cut", [
    ({}, True), ({"events": 0}, True), ({"end_s": 1.5}, False), ({"outcome": "complete"}, False),
    ({"events": 5}, False), ({"status": 504, "outcome": "http-error"}, False), ({"end_s": None}, False),
])
def test_what_counts_as_an_early_cut(shape, cut):
    assert trials.early_cut(result(**shape)) is cut


class Server:
    url = "http://127.0.0.1:9"


@pytest.mark.parametrize("first, second, expected, retried", [
    (result(), result("complete", 12, 1.2), "complete", 1),  # cut once: measured again
    (result(), result(), "truncated", 1),  # cut every time: what the path does, kept
    (result("complete", 12, 1.2), None, "complete", 0),
])
def test_the_entry_is_measured_again_once(monkeypatch, first, second, expected, retried):
    answers = iter([first, second])

    async def fake(url, body, **options):
        return next(answers)
    monkeypatch.setattr(trials.client, "measure_stream", fake)
    target = trials.Target("http://127.0.0.1:1", Server(), "tiny", Options())
    got = asyncio.run(target.measure({}))
    assert got.outcome == expected and len(target.retried) == retried
    assert all(r.cut is first and r.again is second for r in target.retried)


def test_the_baseline_straight_to_the_server_is_not_measured_again(monkeypatch):
    answers = iter([result(), result("complete", 12, 1.2)])

    async def fake(url, body, **options):
        return next(answers)
    monkeypatch.setattr(trials.client, "measure_stream", fake)
    target = trials.Target("http://127.0.0.1:1", Server(), "tiny", Options())
    assert asyncio.run(target.measure({}, url=Server.url)).outcome == "truncated" and not target.retried


class FakeServer:
    """The lab's server as the trial sees it (its baseline): the fake upstream's paced stream."""

    def __init__(self, url: str) -> None:
        self.url = url


# 12 events 100 ms apart, the streaming trial's own pace (trials.INTERVAL_S, STREAM_TOKENS).
PACED = f"n={trials.STREAM_TOKENS}&interval={trials.INTERVAL_S}"


def streaming_through(path: str, every: int = 2, trial: str = "streaming",
                      options: Options = Options()) -> tuple[trials.Measured, int]:
    """The trial through the fake's `path`, and how many requests /flaky answered."""
    with fake_upstream() as upstream:
        target = trials.Target(upstream.base_url, FakeServer(upstream.base_url), "tiny", options,
                               path=f"{path}?every={every}&{PACED}")
        measured = asyncio.run(trials.run_trial(trial, target))
        return measured, upstream.stats.flaky


def verdict_of(trial: trials.Measured) -> VerifyReport:
    report = VerifyReport(proxy="traefik", checks=[CheckOutcome(trial.name, trial.passed, trial.observed,
                                                                kind=trial.kind, skipped=trial.skipped)])
    report.findings = judge.findings("traefik", [], [trial], {})
    return report


def test_a_cut_that_does_not_repeat_is_a_failed_check_not_a_note():
    trial, answered = streaming_through("/flaky")
    assert answered == 2, "the path was asked twice: the cut, then the stream"
    assert not trial.passed and trial.kind == CUT_KIND and trial.skipped is None
    assert trial.observed.startswith("1 of 2 tries cut ") and "ms after the headers" in trial.observed
    cut_ms = int(trial.observed.split(" tries cut ")[1].split(" ")[0])
    assert cut_ms <= EARLY_CUT_S * 1000
    assert "the second try: complete (12 events)" in trial.observed
    # The second try streamed at the pace: the streaming judge's own reading is kept beside it.
    assert "streaming then: streamed" in trial.observed and len(trial.results) == 2
    report = verdict_of(trial)
    [finding] = report.findings
    assert finding.kind == CUT_KIND and finding.severity == "failure" and finding.limit_s is None
    assert report.verdict == "failure" and report.exit_status == 1
    # No setting is blamed: a writeTimeout the reading suspected stays a warning of its own.
    assert finding.where is None and finding.fix is None and finding.scenario is None
    suspected = Suspicion("total-timeout", "traefik.yml:3", "writeTimeout 10s", "writeTimeout 0s", ("long-stream",),
                          limit_s=10.0)
    blamed = judge.findings("traefik", [suspected], [trial], {})
    assert [(f.severity, f.where, f.limit_s) for f in blamed] == [("failure", None, None),
                                                                   ("warning", "traefik.yml:3", 10.0)]


def test_a_path_that_cuts_every_stream_is_a_failed_check_too():
    trial, answered = streaming_through("/flaky", every=1)
    assert answered == 2
    assert not trial.passed and trial.kind == CUT_KIND
    assert trial.observed.startswith("2 of 2 tries cut ") and "the second try: cut the same way" in trial.observed
    assert verdict_of(trial).exit_status == 1


def test_a_path_that_never_cuts_passes_with_no_second_try():
    trial, answered = streaming_through("/paced")
    assert answered == 0 and trial.passed and trial.kind is None and "tries cut" not in trial.observed
    assert verdict_of(trial).exit_status == 0


STREAMS = Options(streams=3)


def test_a_cut_among_concurrent_streams_is_the_early_cut_not_a_connection_limit():
    """Of 3 streams at once, the first to arrive is cut (/flaky, every=5): measured again alone, it
    is told as the other trials tell a cut, and the burst's judge reads 3 whole streams."""
    trial, answered = streaming_through("/flaky", every=5, trial="concurrent-streams", options=STREAMS)
    assert answered == 4, "3 streams at once, then the cut one again"
    assert not trial.passed and trial.kind == CUT_KIND and trial.limit_s is None
    assert trial.observed.startswith("1 of 2 tries cut ") and "the second try: complete (12 events)" in trial.observed
    assert "concurrent-streams then: 3 streams complete" in trial.observed, trial.observed
    assert len(trial.results) == 4 and sum(trials.early_cut(r) for r in trial.results) == 1
    [finding] = verdict_of(trial).findings
    assert finding.kind == CUT_KIND and finding.where is None and finding.fix is None


def test_concurrent_streams_that_are_never_cut_pass_with_no_second_try():
    trial, answered = streaming_through("/paced", trial="concurrent-streams", options=STREAMS)
    assert answered == 0 and trial.passed and trial.kind is None, trial.observed
    assert "tries cut" not in trial.observed and len(trial.results) == 3
