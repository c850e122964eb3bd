"""What `labs probe` reports: findings with their hop, one check per line, and the numbers.

    {"urls", "origin": "streamlab"|"other", "ok", "skipped": [check names],
     "findings": [{"kind", "severity", "hop", "evidence", "limit_s", "hints", "scenario", "fix", "reason"}],
     "checks": [{"name", "passed", "observed", "skipped"?}], "measurements": {...}}

A check that could not measure is skipped with the reason: not passed, and no finding. `ok` (and
exit status 0) means every check passed: with one skipped and no failure the verdict is
"inconclusive" (exit status 2, labs/findings/report.py), and every output says which were skipped.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from labs.client.durations import milliseconds
from labs.findings import CheckOutcome, Finding, PathReport, lab_command
from labs.findings.ci import Place
from labs.probe import held_headers, platforms

FINDING_KEYS = ("kind", "severity", "hop", "evidence", "limit_s", "hints", "scenario", "fix", "reason")


@dataclass
class ProbeReport(PathReport):
    urls: list[str] = field(default_factory=list)
    origin: str = "other"
    measurements: dict[str, Any] = field(default_factory=dict)
    # The stamped stream per protocol (HTTP/1.1, and HTTP/2 where the entry offers it), see
    # labs/probe/flow.py by_protocol.
    protocols: list[dict[str, Any]] = field(default_factory=list)
    _by_check: dict[str, Finding] = field(default_factory=dict, repr=False)

    def add(self, seen: Any, scenario: str | None, fix: str | None) -> None:
        """One check's observation: its check line, and its finding when it saw the fault."""
        self.checks.append(CheckOutcome(name=seen.check, passed=not seen.fault and not seen.skipped,
                                        observed=seen.observed, kind=seen.kind, skipped=seen.skipped,
                                        ran=getattr(seen, "ran", True)))
        if seen.fault:
            # An idle check is named after the silence's position (idle-timeout-before-headers).
            position = seen.check.removeprefix(f"{seen.kind}-") if seen.kind == "idle-timeout" else None
            held = bool(seen.measurements.get(held_headers.KEY))
            finding = Finding(kind=seen.kind, severity="warning" if seen.reason else "failure",
                              evidence=seen.evidence, scenario=scenario, fix=idle_fixes(seen, fix, held),
                              limit_s=seen.limit_s, hop=seen.hop, reason=seen.reason,
                              hints=tuple(platforms.hints(seen.kind, position, seen.limit_s, held)))
            self.findings.append(finding)
            self._by_check[seen.check] = finding

    def finding_for(self, check: str) -> Finding | None:
        """The finding a check produced (None when it found nothing)."""
        return self._by_check.get(check)

    def skipped(self) -> list[str]:
        """The checks that measured nothing (each with its reason in its CheckOutcome)."""
        return [c.name for c in self.checks if c.skipped]

    def hop_name(self, hop: int | None) -> str:
        return "? (the probe could not tell)" if hop is None else f"{hop} ({self.urls[hop]})"

    def place(self, finding: Finding) -> Place:
        """Where a CI shows the finding: the URL of its hop (a URL, not a file of the user's);
        the outermost URL when the probe could not tell the hop."""
        hop = 0 if finding.hop is None else finding.hop
        url = self.urls[hop] if hop < len(self.urls) else None
        return Place(url=url, said=f"At hop {self.hop_name(finding.hop)}.")

    def to_json(self) -> dict[str, Any]:
        return {
            "urls": self.urls, "origin": self.origin, "ok": self.ok, "verdict": self.verdict, "skipped": self.skipped(),
            "findings": [{key: getattr(f, key) for key in FINDING_KEYS} for f in self.findings],
            "checks": [c.to_json() for c in self.checks],
            "protocols": self.protocols,
            "measurements": _plain(self.measurements),
        }


def idle_fixes(seen: Any, fix: str | None, held: bool) -> str | None:
    """An idle limit's fixes, then the heartbeat the path and its clients need (the clients'
    limits are never measured on the path: labs/probe/platforms.py CLIENTS), and for headers
    held until the first byte, the comment that lets them go."""
    if seen.kind != "idle-timeout":
        return fix
    return " | ".join(part for part in (held_headers.FIX if held else None, fix,
                                        platforms.heartbeat_advice(seen.limit_s)) if part)


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def protocol_table(rows: list[dict[str, Any]]) -> Table:
    """The same stamped stream over each protocol, side by side."""
    table = Table(title="the stream by protocol (outermost entry)", header_style="bold")
    judged = [key for key in ("buffering", "coalescing") if key in rows[0]]
    for column in ("protocol", "TTFT", "E2E", "events/read", "gap p50 / max", "outcome", *judged):
        table.add_column(column)
    for row in rows:
        table.add_row(row["protocol"], milliseconds(row["ttft_s"]), milliseconds(row["e2e_s"]),
                      f"{row['events_per_read_mean'] or 0:.2f} (max {row['events_per_read_max'] or 0})",
                      f"{milliseconds(row['gap_p50_s'])} / {milliseconds(row['gap_max_s'])}", row["outcome"],
                      *(row[key] for key in judged))
    return table


def print_report(report: ProbeReport, console: Console) -> None:
    origin = ("the lab's server (a canary: every check can steer it)" if report.origin == "streamlab"
              else "not the lab's server: only what a client can see was measured")
    console.print(f"[bold]path[/bold]: {' -> '.join(report.urls)}")
    console.print(f"[bold]origin[/bold]: {origin}")
    console.print(check_table(report))
    if len(report.protocols) > 1:
        console.print(protocol_table(report.protocols))
    print_findings(report, console)
    console.print(verdict_line(report))


def check_table(report: ProbeReport) -> Table:
    checks = Table(title="checks", show_header=True, header_style="bold")
    for column in ("check", "result", "observed"):
        checks.add_column(column)
    for check in report.checks:
        verdict = ("[yellow]skipped[/yellow]" if check.skipped else
                   "[green]pass[/green]" if check.passed else "[red]FAIL[/red]")
        checks.add_row(check.name, verdict, check.observed)
    return checks


def print_findings(report: ProbeReport, console: Console) -> None:
    for f in report.findings:
        style = "red" if f.severity == "failure" else "yellow"
        limit = "" if f.limit_s is None else f", limit {f.limit_s:.2f} s"
        console.print(f"[{style}]{f.severity}[/{style}] [bold]{f.kind}[/bold] at hop "
                      f"{report.hop_name(f.hop)}{limit}", highlight=False)
        console.print(f"  evidence: {f.evidence}", highlight=False)
        for hint in f.hints:  # a documented limit the measured one matches: a lead, not a measurement
            console.print(f"  matches the documented limit of {hint}", highlight=False)
        if f.reason:
            console.print(f"  only a warning: {f.reason}", highlight=False)
        print_fixes(f.fix, f.scenario, console)


def print_fixes(fixes: str | None, scenario: str | None, console: Console) -> None:
    """A finding's fixes (` | ` between them) and the lab command that shows its scenario."""
    for fix in (fixes or "").split(" | "):
        if fix:
            console.print(f"  fix: {fix}", highlight=False)
    if scenario:
        console.print(f"  see it in the lab: {lab_command(scenario)}", highlight=False)


def verdict_line(report: ProbeReport, failures: int | None = None) -> str:
    """The last line; `failures`: the failures counted, when more than the findings (MCP's named faults)."""
    verdict = {"ok": "[green]ok: no failure found[/green]", "failure": "[red]failures found[/red]",
               "inconclusive": "[yellow]inconclusive: no failure found, not everything measured[/yellow]"
               }[report.verdict]
    verdict += f" ({len(report.findings) if failures is None else failures} findings, {len(report.checks)} checks)"
    skipped = len(report.skipped())
    if skipped:  # what could not be measured is never part of the "no failure"
        verdict += (f"; [yellow]{skipped} check(s) skipped (not measured)[/yellow], "
                    f"see their reasons above")
    return verdict
