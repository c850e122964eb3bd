"""The finding kind's own judge over a run: the decision `labs verify` and `labs probe` make on a
user's path, made here on the catalogue's real broken and fixed paths.

`finding(kind)` passes when the kind's judge (found through the one table, `labs.findings.KINDS`)
names the fault in the run; `no_finding(kind)` when it names none, and the run could tell (a
cure that proved nothing is no cure). The run's baseline is its workload: the first token due
when its silences before it end, one token per the run's interval; the silence a judge reads is
the one the workload keeps (its mid-stream pause, else its delays before the first token), and
a departure's release is the server's own (`Run.release_s`).
"""
from __future__ import annotations

from labs.findings import BY_ID, Evidence, FindingKind, Pacing, Verdict
from labs.scenario.model import Check, Run


def silence_kept(run: Run) -> float | None:
    knobs = run.knobs
    if knobs.get("pause_s"):
        return float(knobs["pause_s"])
    before = float(knobs.get("headers_delay_s", 0.0)) + float(knobs.get("first_token_delay_s", 0.0))
    return before or None


def evidence(run: Run) -> Evidence:
    return Evidence(run.results, Pacing(run.first_due_s, run.interval_s), silence_s=silence_kept(run),
                    release_s=run.release_s)


def verdict(kind: FindingKind, run: Run) -> Verdict:
    return BY_ID[kind].judge(evidence(run))


def finding(kind: FindingKind) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = verdict(kind, run)
        return seen.observed, seen.fault
    return Check(f"the {kind} judge names the fault (as labs verify and labs probe would)", measure)


def no_finding(kind: FindingKind) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = verdict(kind, run)
        return seen.observed, not seen.fault and not seen.untold
    return Check(f"the {kind} judge names no fault (as labs verify and labs probe would)", measure)
