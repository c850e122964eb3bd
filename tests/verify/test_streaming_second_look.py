"""A stream whose events came grouped, but without the hop delay that makes the grouping the
path's, proves neither way (labs/findings/coalescing.py grouped_too_soon): verify's streaming
trials and the probe's stamped stream ask one more and judge that one.

HAProxy without http-no-delay (tests/data/user-configs/haproxy-user) groups 3 events a read
105 ms late in most streams, and in 1 of 26 here (1 of 10 with both cores busy) 2.4 a read,
too little delayed to tell: a CI run read that one as a pass. The streams here are built by hand at the trials' pace
(12 events 100 ms apart), so the judges' reading of each is known."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from labs.client.results import Event, StreamResult
from labs.findings import coalescing
from labs.probe import flow, knobs
from labs.probe.base import Budget, Context, Settings
from labs.probe.path import Path
from labs.verify import trials
from labs.verify.model import Options

N = trials.STREAM_TOKENS
INTERVAL = trials.INTERVAL_S


def stream(per_read: int, held_s: float) -> StreamResult:
    """N events sent one per interval, read `per_read` at a time: each lump leaves when its last
    event is sent, plus `held_s` (a hop's delay)."""
    events = []
    for i in range(N):
        lump = i // per_read
        last_sent = min((lump + 1) * per_read, N) - 1
        arrival = 0.05 + last_sent * INTERVAL + held_s
        events.append(Event(t=arrival, read=lump + 1, kind="content", hop_s=arrival - (0.05 + i * INTERVAL)))
    return StreamResult(status=200, outcome="complete", headers_s=0.01, end_s=events[-1].t + 0.01, events=events)


DIRECT = stream(1, 0.0)
ALONE = stream(1, 0.0)
# Two a read, each lump let go when its second event is sent: the first event of each waited one
# interval, the second none, so the median event waited half an interval... less a hair.
GROUPED_SOON = stream(2, -0.001)
GROUPED_LATE = stream(3, 0.1)  # three a read, 100 ms past the last one's sending


class Server:
    url = "http://127.0.0.1:9"


def streaming(monkeypatch, answers: list[StreamResult]) -> tuple[trials.Measured, int]:
    """The trial with the path's answers in order (the direct baseline is cached by server)."""
    monkeypatch.setitem(trials._DIRECT, Server.url, DIRECT)
    asked = iter(answers)
    count = 0

    async def measure(url, body, **options):
        nonlocal count
        count += 1
        return next(asked)

    monkeypatch.setattr(trials.client, "measure_stream", measure)
    target = trials.Target("http://127.0.0.1:1", Server(), "tiny", Options())
    return asyncio.run(trials.streaming(target)), count


def test_the_hand_built_streams_read_as_intended():
    pace = trials.paced_like(DIRECT)
    assert trials.judge_streaming(ALONE, DIRECT).passed and not coalescing.grouped_too_soon(ALONE, pace)
    soon = trials.judge_streaming(GROUPED_SOON, DIRECT)
    assert soon.passed and coalescing.grouped_too_soon(GROUPED_SOON, pace)
    late = trials.judge_streaming(GROUPED_LATE, DIRECT)
    assert not late.passed and late.kind == "coalescing" and not coalescing.grouped_too_soon(GROUPED_LATE, pace)
    # Held altogether is buffering's, and unstamped proves nothing: neither is asked again.
    held = stream(N, 0.0)
    assert not trials.judge_streaming(held, DIRECT).passed and not coalescing.grouped_too_soon(held, pace)
    unstamped = replace(GROUPED_SOON, events=[replace(e, hop_s=None) for e in GROUPED_SOON.events])
    assert not coalescing.grouped_too_soon(unstamped, pace)


@pytest.mark.parametrize("answers, passed, asked", [
    ([ALONE], True, 1),  # streamed event by event: one stream tells
    ([GROUPED_LATE], False, 1),  # grouped and late: coalescing, at once
    ([GROUPED_SOON, GROUPED_LATE], False, 2),  # the second stream shows the path's grouping
    ([GROUPED_SOON, ALONE], True, 2),  # the second streamed: the first was the client's slow reads
])
def test_a_grouped_stream_too_soon_to_tell_is_asked_again(monkeypatch, answers, passed, asked):
    measured, count = streaming(monkeypatch, answers)
    assert (measured.passed, count) == (passed, asked), measured.observed
    assert ("a second stream: the first grouped 2.0 events a read" in measured.observed) is (asked == 2)
    assert measured.results == [answers[-1]]


def test_the_probe_reads_a_second_stream_when_the_first_was_grouped_too_soon(monkeypatch):
    assert knobs.STREAM_INTERVAL_S == INTERVAL  # the hand-built streams are at the probe's pace too
    answers = iter([GROUPED_SOON, GROUPED_LATE])
    asked = []

    async def measure(url, body, **options):
        asked.append(options.get("accept_encoding"))
        return next(answers)
    monkeypatch.setattr(flow.client, "measure_stream", measure)
    ctx = Context(Path(urls=["http://127.0.0.1:1/v1"], model="m", origin="streamlab"), Settings(), Budget(60))
    seen = asyncio.run(flow.Coalescing().observe(ctx, 0))
    assert asked == [None, None] and seen.fault, seen
    assert seen.measurements["grouped_too_soon"]["bursts"] == 6  # the first stream, kept in --json
    # A gzip stream is the compression check's: never asked twice for grouping.
    ctx.notes.clear()
    answers = iter([GROUPED_SOON])
    assert asyncio.run(flow.measure(ctx, 0, gzip=True)) is GROUPED_SOON and asked[-1] == flow.GZIP
