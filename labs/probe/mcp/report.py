"""What `labs probe --mcp` reports: the chat probe's report (checks, findings with their hop, the
numbers), plus the MCP faults no finding kind declares yet (a session lost to another replica,
held GET headers), each with its hop, evidence and fix, and counted as failures (exit status 1).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rich.console import Console

from labs.findings import BY_ID, CheckOutcome
from labs.probe.report import ProbeReport, check_table, print_findings, print_fixes, verdict_line


@dataclass
class NamedFault:
    kind: str  # session-affinity, held-headers
    hop: int | None
    evidence: str
    fix: str | None = None
    scenario: str | None = None


@dataclass
class McpProbeReport(ProbeReport):
    faults: list[NamedFault] = field(default_factory=list)
    server: str = ""  # what the outermost entry answered: sessions or stateless, its tools

    def add(self, seen: Any, scenario: str | None, fix: str | None) -> None:
        if seen.kind in BY_ID:
            super().add(seen, scenario, fix)
            return
        self.checks.append(CheckOutcome(name=seen.check, passed=not seen.fault and not seen.skipped,
                                        observed=seen.observed, kind=None, skipped=seen.skipped, ran=seen.ran))
        if seen.fault:
            self.faults.append(NamedFault(seen.kind, seen.hop, seen.evidence, fix, scenario))

    @property
    def verdict(self) -> Literal["ok", "failure", "inconclusive"]:
        """A named fault is a failure, as a finding is; otherwise the chat probe's verdict (a
        failed check here always names a fault, so the failed-self-check rule does not apply)."""
        return "failure" if self.faults else super().verdict

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "server": self.server, "faults": [asdict(f) for f in self.faults]}


def print_mcp_report(report: McpProbeReport, console: Console) -> None:
    console.print(f"[bold]path[/bold]: {' -> '.join(report.urls)}")
    console.print(f"[bold]server[/bold]: {report.server}")
    console.print(check_table(report))
    for fault in report.faults:
        console.print(f"[red]failure[/red] [bold]{fault.kind}[/bold] at hop {report.hop_name(fault.hop)}",
                      highlight=False)
        console.print(f"  evidence: {fault.evidence}", highlight=False)
        print_fixes(fault.fix, fault.scenario, console)
    print_findings(report, console)
    console.print(verdict_line(report, len(report.findings) + len(report.faults)))
