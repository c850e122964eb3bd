"""How a verify report reads in a terminal (rich tables) and as one JSON document."""
from __future__ import annotations

import json

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from labs.findings import lab_command
from labs.verify.model import VerifyReport


def to_json(report: VerifyReport) -> str:
    return json.dumps(report.to_json(), indent=2)


def print_report(report: VerifyReport, console: Console) -> None:
    console.print(f"[bold]{report.proxy}[/bold] {report.file}: {report.route}")
    settings = Table(title="settings in effect for POST /v1/chat/completions", show_header=True,
                     header_style="bold")
    for column in ("setting", "value", "where"):
        settings.add_column(column)
    for setting in report.settings.values():
        settings.add_row(setting.name, setting.text, setting.where)
    console.print(settings)
    if report.rewrites:
        console.print("[bold]changed so it runs here[/bold] (loopback only; $RUN is the run's own folder):")
        console.print(Syntax(report.rewrites, "diff", theme="ansi_dark", word_wrap=True))
    for note in report.notes:
        console.print(f"note: {note}")
    checks = Table(title="dynamic checks (the lab's client, in front of the lab's server)", header_style="bold")
    for column in ("check", "result", "observed"):
        checks.add_column(column)
    for check in report.checks:
        result = ("[yellow]skipped[/yellow]" if check.skipped else
                  "[green]pass[/green]" if check.passed else "[red]FAIL[/red]")
        checks.add_row(check.name, result, check.observed)
    console.print(checks)
    if report.findings:
        findings = Table(title="findings", header_style="bold", show_lines=True)
        for column in ("kind", "severity", "where", "evidence", "fix", "scenario"):
            findings.add_column(column, overflow="fold")
        for f in report.findings:
            severity = "[red]failure[/red]" if f.severity == "failure" else "[yellow]warning[/yellow]"
            evidence = f.evidence + (f" (limit {f.limit_s:g} s)" if f.limit_s is not None else "")
            if f.reason:
                evidence += f"\n[dim]{f.reason}[/dim]"
            findings.add_row(f.kind, severity, f.where or "-", evidence, f.fix or "-", lab_command(f.scenario) if f.scenario else "-")
        console.print(findings)
    console.print(f"{verdict_line(report)} ({report.wall_s:.0f} s)")


def verdict_line(report: VerifyReport) -> str:
    """ok only when every check that ran passed; what was not measured is said, never hidden."""
    if report.verdict == "failure":
        line = f"[red]{len(report.failures())} failure(s)[/red]"
    elif report.verdict == "inconclusive":
        line = "[yellow]inconclusive[/yellow]: no failure found, but not everything was measured"
    else:
        line = "[green]ok[/green]: no failure, every check passed"
    unmeasured = report.unmeasured()
    if unmeasured:
        line += "; [yellow]not measured[/yellow]: " + ", ".join(
            f"{c.name} ({'skipped' if c.skipped else 'failed'})" for c in unmeasured) + ", see above"
    return line
