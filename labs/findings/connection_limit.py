"""connection-limit: streams refused, reset or queued beyond a count.

Reads `Evidence.streams`, a burst started together, and `Evidence.origin_first_token_s` when the
origin's records were readable. Any stream that did not complete shows a limit. So does a wave of
first tokens: a queued stream starts only when one ahead of it ends, so its first token waits
about a whole stream longer than the first stream's. The wait counted is the one in front of the
origin (the client's TTFT less the origin's own first token), so the origin's queue never passes
for the path's; the yardstick is the shortest stream, the origin's pace however busy the machine
(the longest, stretched by a busy CPU, could hide the wave).

`labs load` keeps no per-stream list (Locust reports percentiles), so the judgement is made on a
`Burst`, which a list of streams or a load step's numbers both give.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from labs.client.durations import milliseconds
from labs.client.results import StreamResult
from labs.findings import buffering
from labs.findings.evidence import Evidence, Pacing, Verdict, events_per_read, untold

# A wave: the last first token waits this share of a stream longer than the first. Verify used
# half a stream, the probe 0.8 of the median stream, `labs load` 0.9 of the asked duration (its
# TTFT p99 against it). A queued stream waits a whole stream; 0.8 keeps a fifth for the stream
# ahead to have started late, and leaves room below for a burst's admission on a busy machine
# (every request parsed and templated in turn), which the load lab names as its own limit.
WAVE_SHARE = 0.8


@dataclass(frozen=True)
class Burst:
    """A burst's numbers: how each stream ended, and the first-token waits against one stream."""

    streams: int
    outcomes: Mapping[str, int]
    statuses: Mapping[str, int] = field(default_factory=dict)  # of the streams that got an error
    first_wait_s: float | None = None  # the earliest stream's wait for its first token
    last_wait_s: float | None = None   # the latest's (a load step: its TTFT p99)
    stream_s: float | None = None      # one stream's length once it started (the yardstick)
    origin_known: bool = False         # the waits are in front of the origin (its records), not TTFT
    lumped: bool = False  # every stream was held (a buffering hop): its TTFT is not its start

    @classmethod
    def of(cls, streams: Sequence[StreamResult], origin_first_token_s: Sequence[float | None] = (),
           pacing: Pacing | None = None) -> Burst:
        known = bool(origin_first_token_s) and all(o is not None for o in origin_first_token_s)
        origin = list(origin_first_token_s) if known else [0.0] * len(streams)
        waits = [r.ttft_s - (o or 0.0) for r, o in zip(streams, origin) if r.ttft_s is not None]
        # A stream held to its end, or released late in lumps by a buffer, has no length after its
        # first token that is the origin's pace: it sets no yardstick. One a hop coalesces (two or
        # three events a read, its first token on time: dmr-ollama-haproxy's 3.0, tests/data/wild)
        # keeps the origin's pace to a couple of intervals and does.
        paced = [r for r in streams if r.bursts and not _held(r, pacing)]
        lengths = [r.e2e_s - r.ttft_s for r in paced
                   if r.e2e_s is not None and r.ttft_s is not None and r.e2e_s > r.ttft_s]
        return cls(len(streams), dict(Counter(r.outcome for r in streams)),
                   dict(Counter(str(r.status) for r in streams if r.outcome == "http-error")),
                   min(waits, default=None), max(waits, default=None), min(lengths, default=None), known,
                   lumped=bool(streams) and not paced and not known)

    @property
    def failed(self) -> int:
        return self.streams - self.outcomes.get("complete", 0)

    @property
    def basis(self) -> str:
        return "wait in front of the origin" if self.origin_known else "TTFT"

    @property
    def spread_s(self) -> float:
        if self.first_wait_s is None or self.last_wait_s is None:
            return 0.0
        return self.last_wait_s - self.first_wait_s


def _held(stream: StreamResult, pacing: Pacing | None) -> bool:
    """buffering's own reading of a held stream; without a pace (the probe's burst), its bar for
    lumps alone (a lump of LUMP_EVENTS_PER_READ or more events a read)."""
    if pacing is not None:
        return buffering.held(stream, pacing)[0]
    return events_per_read(stream) >= buffering.LUMP_EVENTS_PER_READ


def waves(burst: Burst) -> bool:
    return bool(burst.stream_s) and burst.spread_s >= WAVE_SHARE * (burst.stream_s or 0.0)


def judge_burst(burst: Burst) -> Verdict:
    n = burst.streams
    if burst.failed:
        shown = ", ".join(f"{v} {k}" for k, v in sorted(burst.outcomes.items()) if k != "complete")
        codes = ", ".join(f"{k} x{v}" for k, v in sorted(burst.statuses.items()))
        return Verdict(True, f"{burst.failed} of {n} streams did not complete ({shown})"
                       + (f" (HTTP {codes})" if codes else ""))
    if burst.lumped:
        return untold(f"all {n} streams completed, each held and let go in lumps (a buffering hop): "
                      "when a held stream's first token arrives says nothing about when it started, "
                      "so queueing cannot be told")
    observed = (f"{n} streams complete; first tokens after {milliseconds(burst.first_wait_s)}.."
                f"{milliseconds(burst.last_wait_s)} ({burst.basis}), one stream {milliseconds(burst.stream_s)}")
    if waves(burst):
        return Verdict(True, f"{observed}: the first tokens came in waves, the last "
                             f"{milliseconds(burst.spread_s)} after the first, about a whole stream: "
                             f"streams beyond a count are queued")
    return Verdict(False, observed)


def judge(evidence: Evidence) -> Verdict:
    return judge_burst(Burst.of(evidence.streams, evidence.origin_first_token_s, evidence.pacing))
