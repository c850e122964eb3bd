"""One trial's result, as verify's check table shows it and its findings read it."""
from __future__ import annotations

from dataclasses import dataclass, field

from labs.client.results import StreamResult
from labs.findings import FindingKind, Verdict


@dataclass
class Measured:
    """One trial's result: passed or not, what it saw, the finding kind when it failed."""

    name: str
    passed: bool
    observed: str
    kind: FindingKind | None = None
    limit_s: float | None = None
    results: list[StreamResult] = field(default_factory=list, repr=False)
    skipped: str | None = None  # why the trial could not tell (the judge's `untold`): not a pass
    ran: bool = True  # False: the path cannot hold this trial (no HTTP/2 on a plain listener)
    # False: no setting of the config can cause this fault (an early cut), so its finding names
    # neither a setting nor a fix, nor the scenario of a setting.
    from_setting: bool = True


def measured(name: str, kind: FindingKind, verdict: Verdict, results: list[StreamResult]) -> Measured:
    """A judge's verdict as a trial's result: a trial that proved nothing is skipped, with the
    reason (neither a pass nor a finding)."""
    if verdict.untold:
        return Measured(name, False, verdict.observed, results=results, skipped=verdict.untold)
    return Measured(name, not verdict.fault, verdict.observed, kind if verdict.fault else None,
                    limit_s=verdict.limit_s, results=results)


def not_run(name: str, why: str) -> Measured:
    return Measured(name, False, f"not run: {why}", skipped=why, ran=False)
