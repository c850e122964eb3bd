"""What every check shares: the slack a noisy machine gets, number formats, and `threshold`.

Margins are multiples of the workload's token interval, never absolute numbers: a streamed
response has TTFT near the first token's due time and one socket read per event, a held one has
TTFT near E2E and few reads.
"""
from __future__ import annotations

from typing import Callable

from labs.client.durations import milliseconds
from labs.client.results import percentile
from labs.scenario.model import Check, Run

# A streamed first token may be late by this many token intervals (scheduling noise, proxy start).
STREAM_SLACK_INTERVALS = 3.0
# A request that arrives as others are cancelled may start this late: a new connection and its
# prefill while the server frees their slots (up to ~150 ms at 20 tok/s on 2 busy cores), well
# short of the symptom it guards against, waiting for an abandoned answer (tens of intervals).
ARRIVAL_SLACK_INTERVALS = 8.0
# Share of content events that must arrive in reads of their own for a stream to count as streamed.
STREAMED_READ_SHARE = 0.75

Value = Callable[[Run], "float | None"]
Bound = Callable[[Run], float]


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def intervals(n: float) -> Bound:
    """A bound of `n` token intervals of the run's workload."""
    return lambda run: n * run.interval_s


def after_due(n: float) -> Bound:
    """A bound `n` token intervals after the first token was due."""
    return lambda run: run.first_due_s + n * run.interval_s


def threshold(label: str, value: Value, bound: Bound, *, at_least: bool,
              shown: Callable[[Run, "float | None"], str] | None = None,
              fmt: Callable[["float | None"], str] = milliseconds) -> Check:
    """`value(run) >= bound(run)` (or `<=`); a value that could not be measured fails.

    The observed text is `shown(run, value)` (default: the value itself) and the bound.
    """
    sign = ">=" if at_least else "<="

    def measure(run: Run) -> tuple[str, bool]:
        observed, limit = value(run), bound(run)
        passed = observed is not None and (observed >= limit if at_least else observed <= limit)
        text = shown(run, observed) if shown else fmt(observed)
        return f"{text} ({sign} {fmt(limit)})", passed
    return Check(label, measure)


def ttfts(run: Run) -> list[float]:
    """Every stream's TTFT, sorted (streams that got no content left out)."""
    return sorted(r.ttft_s for r in run.results if r.ttft_s is not None)


def pooled_gap(run: Run, p: float) -> float | None:
    """The p-th percentile of the gaps of every stream together."""
    return percentile([gap for result in run.results for gap in result.gaps], p)


def outcome_counts(run: Run) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(run.outcomes().items()))
