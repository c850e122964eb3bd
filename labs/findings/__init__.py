"""What the user's-own-path tools report, and how each kind of fault is judged, once.

    kinds       the kinds: id, words, judge, catalogue scenario (the one table)
    evidence    what a judge reads (Evidence, Pacing) and returns (Verdict)
    buffering, coalescing, compression, idle_timeout, total_timeout, departure,
    connection_limit
                one judge per kind, its thresholds beside it
    report      Finding, CheckOutcome, PathReport, UnusableInput, the exit statuses
    ci          a report as a CI reads it: SARIF 2.1.0, GitHub Actions workflow commands

`labs verify`, `labs probe`, `labs load` and the catalogue's checks measure (they choose what to
send) and ask the kind's judge; none of them decides a fault itself.
"""
from __future__ import annotations

from labs.findings.evidence import Evidence, Judge, Pacing, Verdict
from labs.findings.kinds import BY_ID, FINDING_KINDS, KINDS, FindingKind, Kind
from labs.findings.report import (EXIT_FAILURE, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_UNUSABLE, CheckOutcome,
                                  Finding, PathReport, Severity, UnusableInput, lab_command)

__all__ = [
    "BY_ID", "EXIT_FAILURE", "EXIT_INCONCLUSIVE", "EXIT_OK", "EXIT_UNUSABLE", "CheckOutcome", "Evidence",
    "FINDING_KINDS", "Finding", "FindingKind", "Judge", "KINDS", "Kind", "Pacing", "PathReport",
    "Severity", "UnusableInput", "Verdict", "lab_command",
]
