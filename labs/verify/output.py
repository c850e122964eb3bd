"""How a verify report reads: in a terminal (rich tables), as one JSON document, and in a CI
(SARIF 2.1.0 or GitHub workflow commands, `labs.findings.ci`, each finding at its file and line)."""
from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from labs.findings import Finding, UnusableInput, lab_command
from labs.findings import ci
from labs.verify.model import DEFAULT, VerifyReport, display_path

TOOL = "streamlab verify"


def to_json(report: VerifyReport) -> str:
    return json.dumps(report.to_json(), indent=2)


def place(report: VerifyReport, finding: Finding) -> ci.Place:
    """`where` as a CI shows it: `file:line` at that line; the proxy's default (no line of the
    user's sets it) at the file verified, saying so."""
    file, _, line = (finding.where or "").rpartition(":")
    if file and line.isdigit():
        return ci.Place(file=file, line=int(line))
    said = (f"The proxy's default applies: nothing in the config sets it (shown on {report.file})."
            if finding.where == DEFAULT
            else f"Where: {finding.where}." if finding.where else "")
    return ci.Place(file=report.file, said=said)


def for_ci(report: VerifyReport, fmt: str) -> str:
    """The report in a CI format (`sarif` or `github`), as printed on stdout."""
    if fmt == "sarif":
        log = ci.sarif_log(report, tool=TOOL, place=lambda f: place(report, f), exit_code=report.exit_status,
                           run_properties={"measuredOn": report.measured_on} if report.measured_on else None)
        return json.dumps(log, indent=2)
    return "\n".join(ci.workflow_commands(report, tool=TOOL, place=lambda f: place(report, f),
                                           said=report.measured_on.get("said", "")))


def error_for(error: UnusableInput, file: str, fmt: str) -> str:
    """An input verify cannot use (exit status 2) in the format asked for."""
    at = display_path(error.file) if error.file else None
    if fmt == "json":
        document: dict[str, Any] = {"file": file, "ok": False, "error": str(error),
                                    "error_file": error.file, "error_line": error.line}
        return json.dumps(document, indent=2)
    if fmt == "sarif":
        return json.dumps(ci.unusable_sarif_log(error, tool=TOOL, file=at), indent=2)
    return "\n".join(ci.unusable_workflow_commands(error, tool=TOOL, file=at))


def print_report(report: VerifyReport, console: Console) -> None:
    console.print(f"[bold]{report.proxy}[/bold] {report.file}: {report.route}")
    if report.measured_on:
        console.print(report.measured_on["said"], highlight=False)
    settings = Table(title=f"settings in effect for POST {report.path}", show_header=True,
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
    checks = Table(title=f"dynamic checks ({report.measured_with})", header_style="bold")
    for column in ("check", "result", "observed"):
        checks.add_column(column)
    for check in report.checks:
        result = ("[dim]not run[/dim]" if check.skipped and not check.ran else "[yellow]skipped[/yellow]" if check.skipped else
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
    """ok only when every check that ran passed; what was not measured, or not run (--quick,
    --check), is said, never hidden."""
    if report.verdict == "failure":
        line = f"[red]{len(report.failures())} failure(s)[/red]"
    elif report.verdict == "inconclusive":
        line = "[yellow]inconclusive[/yellow]: no failure found, but not everything was measured"
    elif report.not_selected:
        line = "[green]ok[/green]: no failure, every check that ran passed"
    else:
        line = "[green]ok[/green]: no failure, every check passed"
    unmeasured = report.unmeasured()
    if unmeasured:
        line += "; [yellow]not measured[/yellow]: " + ", ".join(
            f"{c.name} ({'skipped' if c.skipped else 'failed'})" for c in unmeasured) + ", see above"
    if report.not_selected:
        line += f"; not run ({report.selected_by}): " + ", ".join(report.not_selected)
    return line
