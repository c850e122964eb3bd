"""What every probe check shares: the run's budget and settings, and what a check observed.

A check measures through one entry of the path and returns an `Observation`: whether it saw its
fault, one line for the check table (and the pytest plugin), the evidence and limit for a finding,
and its numbers for `--json`. `recheck` repeats just enough of it through an inner entry to say
whether that entry still shows the same fault (the chain lab's bisection).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from labs.findings import FindingKind, Verdict
from labs.client.results import StreamResult
from labs.probe.path import Path

Progress = Callable[[str], None]
DEFAULT_MAX_SILENCE_S = 30.0
# Above Envoy's default route timeout (15 s), the commonest total-duration limit.
DEFAULT_MAX_STREAM_S = 20.0
DEFAULT_BUDGET_S = 300.0
DEFAULT_STREAMS = 20


class OutOfBudget(Exception):
    """The run's budget cannot fit what a check still has to measure (the check is skipped)."""


class CannotTell(Exception):
    """An inner entry's measurement proved nothing (its judge said `untold`): rather than clear
    that entry on it, the finding's hop is left unnamed."""


def told(verdict: Verdict) -> Verdict:
    """The verdict of a re-measurement through an inner entry; CannotTell when it is untold."""
    if verdict.untold:
        raise CannotTell(verdict.untold)
    return verdict


class Budget:
    """The whole run's time: checks ask before they start, and streams are cut at the deadline."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def allows(self, seconds: float) -> bool:
        return self.left() >= seconds

    def need(self, seconds: float, what: str) -> None:
        """Raise OutOfBudget unless `seconds` are left for `what`."""
        if not self.allows(seconds):
            raise OutOfBudget(f"the budget has {self.left():.0f} s left, {what} needs {seconds:.0f} s")

    def cap(self, seconds: float) -> float:
        """A timeout of `seconds`, but never past the deadline."""
        return max(0.01, min(seconds, self.left()))


@dataclass
class Settings:
    max_silence_s: float = DEFAULT_MAX_SILENCE_S
    max_stream_s: float = DEFAULT_MAX_STREAM_S
    streams: int = DEFAULT_STREAMS
    http1_only: bool = False  # no HTTP/2 comparison of the streaming checks (--http1-only)


@dataclass
class Context:
    """One probe run: the path, its settings, its budget, and where progress goes."""

    path: Path
    settings: Settings
    budget: Budget
    progress: Progress = lambda message: None
    # What earlier checks found that later ones need (the smallest idle limit, the total limit).
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Observation:
    check: str
    kind: FindingKind
    fault: bool
    observed: str
    evidence: str = ""
    limit_s: float | None = None
    measurements: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the check could not measure (then `fault` is False)
    ran: bool = True  # False: skipped before measuring (needs the canary, out of budget)
    # Set when the fault is only suspected (a warning): why the measurement cannot be sure.
    reason: str | None = None
    hop: int | None = 0


def spent(ctx: Context, result: StreamResult) -> StreamResult:
    """The result, unless the budget's deadline (not the path) ended it: then OutOfBudget."""
    if result.outcome == "timeout" and ctx.budget.left() <= 0.05:
        raise OutOfBudget("the budget ran out in the middle of a measurement")
    return result


def skipped(check: str, kind: FindingKind, reason: str) -> Observation:
    return Observation(check, kind, False, f"not measured: {reason}", skipped=reason)


def not_run(check: str, kind: FindingKind, reason: str) -> Observation:
    """A check this path or run cannot hold (it needs the canary, the budget is spent): it did
    not run, so it neither passes nor leaves the run inconclusive; the output says why."""
    return Observation(check, kind, False, f"not run: {reason}", skipped=reason, ran=False)


def failed(check: str, kind: FindingKind, exc: BaseException) -> Observation:
    """A check that raised measured nothing: skipped with the error, never a pass."""
    return skipped(check, kind, f"the check failed: {type(exc).__name__}: {exc}")


def brief(result: StreamResult) -> dict[str, Any]:
    """The numbers of one stream worth keeping in --json (no per-event list)."""
    summary = result.summary()
    keep = ("status", "outcome", "error", "content_encoding", "ttfb_s", "ttft_s", "e2e_s",
            "gap_p50_s", "gap_p99_s", "gap_max_s", "content_events", "reads", "bursts",
            "events_per_read_mean", "events_per_read_max", "hop_p50_s", "hop_max_s", "heartbeats",
            "disconnect_s", "end_s")
    out = {key: summary[key] for key in keep}
    out["http_version"] = result.http_version
    return out
