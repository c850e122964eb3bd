"""Streams that end with a 200 right after their headers: measured once more, and always reported.

No timeout or buffer a config sets ends a stream within EARLY_CUT_S of its headers with 0-2
events, yet Traefik 3.7's default proxy (Go's) does it to a few POST streams in a thousand
(golang/go#40747; docs/field-notes.md#traefiks-early-cut). A trial's stream cut so (any trial's,
each of concurrent-streams' too) is measured a second time, so the trial's own judge reads a whole stream; the cut itself is
never hidden: the trial fails with "k of 2 tries cut N ms after the headers", named as the kind
whose judge reads a stream cut while it was never silent (CUT_KIND), whatever the second try
showed. A path that cuts now and then truncates answers for its users.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from labs.client.results import StreamResult
from labs.findings import FindingKind
from labs.findings.evidence import ended
from labs.verify.measured import Measured

EARLY_CUT_S = 0.05  # a stream ended this soon after its headers, with 200: not a limit of a config
# The kind whose judge (labs/findings/total_timeout.py) names a stream cut while it was never
# silent: an early cut is one, though at no fixed length.
CUT_KIND: FindingKind = "total-timeout"


def early_cut(result: StreamResult) -> bool:
    """A stream that ended (200, no [DONE]) right after it started: no timeout or buffer a config
    sets ends a stream within 50 ms of its headers with 0-2 events."""
    return (result.status == 200 and result.outcome == "truncated" and result.content_events <= 2
            and result.end_s is not None and (result.headers_s or 0.0) + EARLY_CUT_S >= result.end_s)


@dataclass(frozen=True)
class Retried:
    """A stream cut early and the same request measured again."""

    cut: StreamResult
    again: StreamResult

    def said(self) -> str:
        cuts = [r for r in (self.cut, self.again) if early_cut(r)]
        after = ", ".join(f"{1000 * ((r.end_s or 0.0) - (r.headers_s or 0.0)):.0f}" for r in cuts)
        second = "cut the same way" if early_cut(self.again) else ended(self.again)
        return (f"{len(cuts)} of 2 tries cut {after} ms after the headers ({ended(self.cut)}; "
                f"the second try: {second})")


def reported(trial: Measured, retried: list[Retried]) -> Measured:
    """The trial with its early cuts told: failed, as CUT_KIND, from no setting (its finding
    blames none). A fault the trial's judge found on a whole stream keeps its kind, the cuts said
    beside it; one it found on a stream cut again is the cut's."""
    if not retried:
        return trial
    told = "; ".join(r.said() for r in retried)
    results = [*trial.results, *(r.cut for r in retried)]
    if not trial.passed and trial.kind is not None and not any(early_cut(r.again) for r in retried):
        return replace(trial, observed=f"{trial.observed}; also {told}", results=results)
    # No limit: a cut that does not come back on the second try is not of a fixed length.
    return replace(trial, passed=False, kind=CUT_KIND, limit_s=None, skipped=None, results=results,
                   from_setting=False,
                   observed=f"{told}: a hop ends streams just after they start (no limit a config "
                            f"sets cuts so soon); {trial.name} then: {trial.observed}")
