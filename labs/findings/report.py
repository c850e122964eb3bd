"""What `labs verify`, `labs probe` and `labs load` report about a user's own path, defined once.

A finding names a fault by one of the kinds of `labs.findings.kinds` (the same words in every
command, the JSON output and the pytest plugin), how sure the lab is (`failure`: a measurement showed it;
`warning`: only the config reading suggests it), where it comes from, the evidence, the catalogue
scenario that demonstrates it and the fix to write. A report is the list of findings plus the
checks that ran, so a test runner can turn every check into a test of its own.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from labs.findings.kinds import FINDING_KINDS, FindingKind

Severity = Literal["failure", "warning"]

# Exit statuses shared by verify, probe and load.
EXIT_OK, EXIT_FAILURE, EXIT_UNUSABLE = 0, 1, 2
# No verdict: `labs load` whose client ran out of CPU before the path showed a limit. The same
# status as unusable input: either way the run cannot answer, and what to change is the run.
EXIT_INCONCLUSIVE = EXIT_UNUSABLE


def lab_command(scenario: str) -> str:
    """How a reader runs a catalogue scenario: `make lab-NAME` in a checkout, else the console
    command of the installed package."""
    from server.locations import checkout

    return f"make lab-{scenario}" if checkout() is not None else f"streamlab run {scenario}"


@dataclass
class Finding:
    kind: FindingKind
    severity: Severity
    evidence: str
    where: str | None = None      # file:line of the directive in effect, or "default"
    scenario: str | None = None   # the catalogue scenario that demonstrates it (make lab-NAME)
    fix: str | None = None        # the directive (or change) to write
    limit_s: float | None = None  # for timeouts: the limit measured or read
    hop: int | None = None        # probe: 0-based index of the innermost URL that shows it
    reason: str | None = None     # for a warning: why the measurement did not show it
    at_streams: int | None = None  # load: the concurrency of the first step that showed it
    # probe: documented platform limits the measured one matches (labs/probe/platforms.py), a
    # hint beside the measurement
    hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}; known: {', '.join(FINDING_KINDS)}")
        if self.severity not in ("failure", "warning"):
            raise ValueError(f"unknown severity {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckOutcome:
    """One check that ran: its name (a pytest id), whether it passed, what it observed."""

    name: str
    passed: bool
    observed: str
    kind: FindingKind | None = None  # the finding kind this check looks for, when it has one
    skipped: str | None = None  # why the check could not measure (a pytest skip, not a pass)
    ran: bool = True  # False: skipped before it measured anything (the path cannot hold it)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "passed": self.passed, "observed": self.observed}
        if self.skipped:
            out["skipped"] = self.skipped
            out["ran"] = self.ran
        return out


@dataclass
class PathReport:
    """Findings and checks of one verify or probe run."""

    findings: list[Finding] = field(default_factory=list)
    checks: list[CheckOutcome] = field(default_factory=list)

    @property
    def verdict(self) -> Literal["ok", "failure", "inconclusive"]:
        """"ok" only when every check that ran passed: a failure finding is "failure"; a check
        that could not measure (skipped) or failed without naming a fault (a self-check such as
        loopback-only) leaves the run "inconclusive", never "ok"."""
        if any(f.severity == "failure" for f in self.findings):
            return "failure"
        if any((c.skipped and c.ran) or (not c.passed and not c.skipped) for c in self.checks):
            return "inconclusive"
        if self.checks and not any(c.passed for c in self.checks):
            return "inconclusive"  # nothing was measured: nothing can be "ok"
        return "ok"

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    @property
    def exit_status(self) -> int:
        return {"ok": EXIT_OK, "failure": EXIT_FAILURE, "inconclusive": EXIT_INCONCLUSIVE}[self.verdict]

    def unmeasured(self) -> list[CheckOutcome]:
        """The checks that did not pass without naming a fault: skipped, or a failed self-check."""
        return [c for c in self.checks if (c.skipped and c.ran) or (not c.passed and c.kind is None and not c.skipped)]

    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "failure"]


class UnusableInput(Exception):
    """The input cannot be used (exit status 2): the message names the file and line when known."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        self.file, self.line = file, line
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        super().__init__(f"{where}{message}")
