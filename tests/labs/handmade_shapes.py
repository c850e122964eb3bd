"""The building blocks of the hand-made runs (tests/labs/handmade_runs.py): `Shapes`, which
makes the streams a variant's pacing gives (streamed, held, cut, left...), and `Handmade`, one
scenario's four runs. Times follow the scenario's own knobs, as the runs the lab measures do.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from labs.client.results import Event, StreamResult
from labs.scenario.model import Run, Scenario, VariantName

ACTIVE = "streamlab_active_streams"
TOKENS = "streamlab_tokens_generated_total"


class Shapes:
    """Streams shaped like what the lab measures, at the pace of one variant of a scenario."""

    def __init__(self, scenario: Scenario, variant: VariantName) -> None:
        self.scenario, self.variant = scenario, variant
        lab = dict(scenario.variant(variant).lab)
        self.lab = lab
        knobs = scenario.workload.knobs(lab)
        self.dt = 1.0 / float(knobs["tokens_per_s"])
        self.due = scenario.workload.first_due_s(lab)
        self.script = str(knobs["script"])

    def times(self, n: int = 20, pause_after: int | None = None, pause_s: float = 0.0,
              dt: float | None = None) -> list[float]:
        """When each of `n` tokens arrives when it is due (one silence of `pause_s` after
        `pause_after` tokens)."""
        step = self.dt if dt is None else dt
        return [self.due + 0.01 + step * i + (pause_s if pause_after is not None and i >= pause_after else 0.0)
                for i in range(n)]

    def stream(self, times: list[float], read_of: list[int] | None = None, **fields: Any) -> StreamResult:
        """A complete stream ([DONE], 200) whose content events came at `times` (in socket reads
        `read_of`: one each by default)."""
        reads = read_of or list(range(1, len(times) + 1))
        hop_s = fields.pop("hop_s", None)
        hops = hop_s if isinstance(hop_s, list) else [hop_s] * len(times)
        events = [Event(t=t, read=r, kind="content", text="x", hop_s=h) for t, r, h in zip(times, reads, hops)]
        end = fields.pop("end_s", times[-1] + 0.005 if times else 0.005)
        defaults: dict[str, Any] = dict(
            outcome="complete", saw_done=True, status=200, text=self.script, finish_reason="stop",
            ttft_s=times[0] if times else None, e2e_s=end, end_s=end, reads=len(set(reads)))
        return StreamResult(events=events, **{**defaults, **fields})

    def streamed(self, n: int = 20, pause_after: int | None = None, pause_s: float = 0.0,
                 **fields: Any) -> StreamResult:
        """Every token in a read of its own, when it is due."""
        return self.stream(self.times(n, pause_after, pause_s), **fields)

    def rushed(self, n: int = 20, **fields: Any) -> StreamResult:
        """Every token in a read of its own, but all within milliseconds: not the workload's pace."""
        return self.stream(self.times(n, dt=0.001), **fields)

    def grouped(self, n: int = 20, size: int = 3, **fields: Any) -> StreamResult:
        """Events leave in groups of `size`, each group when its last token was made: each
        event's hop delay is its wait for the group's end (HAProxy without http-no-delay, measured
        at 10 tok/s: 200, 100 and 5 ms)."""
        due = self.times(n)
        ends = [due[min(n - 1, (i // size) * size + size - 1)] for i in range(n)]
        return self.stream(ends, [1 + i // size for i in range(n)],
                           hop_s=[end - t + 0.005 for end, t in zip(ends, due)], **fields)

    def lump(self, n: int = 20, **fields: Any) -> StreamResult:
        """Held: every event in one read when the last token was made."""
        end = self.times(n)[-1]
        return self.stream([end] * n, [1] * n, **fields)

    def rushed_lump(self, n: int = 20, **fields: Any) -> StreamResult:
        """One lump, but of tokens made all at once: nothing was held."""
        return self.stream([self.due + 0.02] * n, [1] * n, **fields)

    def cut(self, k: int, after_s: float, outcome: str = "truncated", **fields: Any) -> StreamResult:
        """`k` tokens when due, then the stream ends `after_s` later without [DONE]."""
        times = self.times(k)
        end = (times[-1] if times else 0.0) + after_s
        result = self.stream(times, outcome=outcome, saw_done=False, end_s=end, finish_reason=None, **fields)
        result.e2e_s = times[-1] if times else None
        result.text = self.script[: k * 3]
        return result

    def left(self, k: int = 3, **fields: Any) -> StreamResult:
        """The client closed the socket after `k` tokens, on purpose."""
        times = self.times(k)
        return self.stream(times, outcome="disconnected", saw_done=False, disconnect_s=times[-1],
                           end_s=times[-1], finish_reason=None, **fields)

    def refused(self, outcome: str = "reset", status: int | None = None, at: float = 0.01) -> StreamResult:
        return StreamResult(outcome=outcome, status=status, start_s=at, end_s=0.005, saw_done=False)

    def run(self, *results: StreamResult, **fields: Any) -> Run:
        return Run(variant=self.variant, workload=self.scenario.workload, results=list(results),
                   lab=self.lab, **fields)


def at(result: StreamResult, start_s: float) -> StreamResult:
    return replace(result, start_s=start_s)


def in_turn(results: list[StreamResult]) -> list[StreamResult]:
    """The streams, each sent after the one before had ended: no load at all."""
    placed, start = [], 0.0
    for result in results:
        placed.append(at(result, start))
        start += (result.end_s or 0.0) + 0.01
    return placed


def one_by_one(shapes: Shapes, make: Callable[[], StreamResult], count: int) -> list[StreamResult]:
    return in_turn([make() for _ in range(count)])


# ---- the scenarios' shapes -----------------------------------------------------------------------
# Each entry: (symptom run, cured run, cured run without the stress, symptom run without it);
# the last two are None where the scenario applies no stress beyond its pacing.
Make = Callable[[Shapes], Run]


@dataclass(frozen=True)
class Handmade:
    symptom: Make
    cure: Make
    cure_without_stress: Make | None = None
    symptom_without_stress: Make | None = None
