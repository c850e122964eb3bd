"""Many streams at once: first tokens in waves, late starters, pooled gaps."""
from __future__ import annotations

from typing import Callable

from labs.client.durations import milliseconds
from labs.scenario.checks.base import after_due, intervals, pooled_gap, threshold, ttfts
from labs.client.results import percentile
from labs.scenario.model import Check, Run


def ttft_spread_at_least(share_of_stream: float) -> Check:
    """Some streams' first token waited most of a whole stream: they queued behind others."""
    def measure(run: Run) -> tuple[str, bool]:
        seen = ttfts(run)
        e2e = min((r.e2e_s for r in run.results if r.e2e_s is not None), default=None)
        if not seen or e2e is None:
            return "no content", False
        return (f"TTFT min {milliseconds(seen[0])}, max {milliseconds(seen[-1])} (shortest stream {milliseconds(e2e)})",
                seen[-1] - seen[0] >= share_of_stream * e2e)
    return Check(f"TTFT in waves: the last first token waits >= {share_of_stream:.0%} of a stream", measure)


def ttft_p99_within(n: float) -> Check:
    return threshold(f"every stream starts promptly: TTFT p99 within {n:g} token intervals",
                     lambda run: percentile(ttfts(run), 99), after_due(n), at_least=False,
                     shown=lambda run, p99: f"TTFT p99 {milliseconds(p99)}")


def ttft_max_at_least(n: float) -> Check:
    """Some stream's first token left at least `n` token intervals after it was due."""
    def latest(run: Run) -> float | None:
        seen = ttfts(run)
        return seen[-1] if seen else None
    return threshold(f"tokens leave late: the latest first token >= {n:g} token intervals after due",
                     latest, after_due(n), at_least=True,
                     shown=lambda run, last: (f"TTFT min {milliseconds((ttfts(run) or [None])[0])}, "
                                              f"max {milliseconds(last)}"))


def gap_p99_at_most(n: float) -> Check:
    return threshold(f"gap p99 over all streams <= {n:g} token intervals",
                     lambda run: pooled_gap(run, 99), intervals(n), at_least=False,
                     shown=lambda run, p99: f"gap p50 {milliseconds(pooled_gap(run, 50))}, p99 {milliseconds(p99)}")


def _stayers_ttfts(run: Run) -> list[float | None]:
    """TTFT of the streams that did not leave on purpose (the requests that came after)."""
    return [r.ttft_s for r in run.results if r.outcome != "disconnected"]


def _stayers(pick: Callable[[list[float]], float]) -> Callable[[Run], "float | None"]:
    def value(run: Run) -> float | None:
        seen = _stayers_ttfts(run)
        if not seen or any(t is None for t in seen):
            return None  # a later request that never got a token fails both directions
        return pick(seen)
    return value


def _shown_stayers(run: Run, _: float | None) -> str:
    return "TTFT of the later requests: " + ", ".join(milliseconds(t) for t in _stayers_ttfts(run))


def stayers_ttft_at_least(n: float) -> Check:
    """The requests that arrived after others left waited for a slot: their first token is late."""
    return threshold(f"requests arriving after the departures queue: TTFT >= {n:g} token intervals",
                     _stayers(min), after_due(n), at_least=True, shown=_shown_stayers)


def stayers_ttft_within(n: float) -> Check:
    return threshold(f"requests arriving after the departures start at once: TTFT <= {n:g} token "
                     "intervals", _stayers(max), after_due(n), at_least=False, shown=_shown_stayers)
