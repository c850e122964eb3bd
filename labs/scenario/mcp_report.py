"""An MCP scenario's report (labs/scenario/report.py's counterpart for an `McpOutcome`): in the
terminal, one row per proxy and variant with its verdict, what the official client saw of each
session and what each replica answered; on disk, reports/<scenario>/report.json and report.md.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from labs import provenance
from labs.client.durations import milliseconds
from labs.scenario.mcp_model import McpRun
from labs.scenario.mcp_runner import McpMeasured, McpOutcome
from labs.scenario.report import scenario_fields


def _rounded(values: list[float]) -> str:
    return f"{milliseconds(min(values), unit=False)}-{milliseconds(max(values))}" if values else "-"


def client_saw(run: McpRun) -> str:
    """The sessions as the SDK's user saw them: how many completed, the errors, when progress came,
    what the SDK reported without raising (the TypeScript SDK's onerror)."""
    done = sum(session.completed for session in run.sessions)
    errors = sorted({session.error for session in run.sessions if session.error})
    calls = [call for session in run.sessions for call in session.calls]
    firsts = [call.first_progress_s for call in calls if call.first_progress_s is not None]
    gaps = [max(call.gaps_s) for call in calls if call.gaps_s]
    text = f"{done}/{len(run.sessions)} sessions completed"
    if errors:
        text += f"; errors: {'; '.join(errors)}"
    if firsts:
        text += f"; first progress {_rounded(firsts)}, largest gap {_rounded(gaps)}"
    reconnects = sum(session.reconnects for session in run.sessions)
    notified = sum(len(session.notifications) for session in run.sessions)
    if reconnects or notified or any(r["status"] is None for r in run.requests):
        text += f"; GET stream reopened {reconnects} times, {notified} server notifications received"
    for alone in run.lone_gets:  # the GET read alone on its connection (mcp-held-headers)
        text += _own_gets(run)
        text += (f"; a lone GET ({alone.http_version or 'no HTTP'}): headers after {milliseconds(alone.headers_s)}, "
                 f"first body byte after {milliseconds(alone.first_byte_s)}")
    logged = sorted({message for session in run.sessions for message, _ in session.logged})
    if logged:
        text += f"; reported to onerror: {'; '.join(logged)}"
    return text


def _own_gets(run: McpRun) -> str:
    """When the official client's own GET streams got their 200, after the origin sent it."""
    late = [arrived - sent["at"] for session in run.sessions
            for arrived, sent in zip(session.get_headers_at, (r for r in run.requests if r["http_method"] == "GET"
                                                               and r["session"] == session.session_id))]
    return f"; the official client's own GET: 200 {_rounded(late)} after the origin sent it" if late else ""


def replicas_saw(run: McpRun) -> str:
    """Requests per replica and status, e.g. 'replica 0 -> 200: 6, replica 1 -> 404: 4'."""
    return ", ".join(f"{key}: {count}" for key, count in run.counts().items()) or "no request"


def proxy_shown(run: McpRun) -> str:
    """`nginx 1.30`: the proxy with the release that ran."""
    return f"{run.proxy} {run.release}".strip()


def rows(outcome: McpOutcome) -> list[tuple[str, McpMeasured]]:
    """(variant label, its run) in the order they ran; a fix carries its one-line summary."""
    labelled = []
    for runs in outcome.runs.values():
        for measured in runs:
            name = measured.run.variant
            fix = outcome.scenario.fix(name) if name != "broken" else None
            labelled.append((name if fix is None else f"{name} ({'NOT a fix' if not fix.cures else fix.summary})",
                             measured))
    return labelled


def expectation(outcome: McpOutcome, measured: McpMeasured) -> str:
    """A run's verdict in the words of its side: the symptom reproduced, a fix cured, a look-alike still failed."""
    if measured.run.variant == "broken":
        return "symptom reproduced" if measured.passed else "symptom did NOT reproduce"
    if outcome.scenario.fix(measured.run.variant).cures:
        return "cured" if measured.passed else "NOT cured"
    return "still fails (not a fix)" if measured.passed else "did NOT fail: its lesson is wrong here"


def print_outcome(outcome: McpOutcome, console: Console | None = None) -> None:
    console = console or Console()
    scenario = outcome.scenario
    console.rule(f"[bold]{scenario.name}[/bold]: {scenario.symptom}")
    table = Table(show_header=True, header_style="bold")
    for column in ("variant", "proxy", "the client saw", "the replicas answered", "verdict"):
        table.add_column(column, overflow="fold")
    for label, measured in rows(outcome):
        run = measured.run
        colour = "green" if measured.passed else "red"
        table.add_row(escape(label), f"{run.proxy} {run.release}".strip(), escape(client_saw(run)),
                      escape(replicas_saw(run)), f"[{colour}]{expectation(outcome, measured)}[/]")
    console.print(table)
    failed = [(label, result) for label, measured in rows(outcome) for result in measured.results if not result.passed]
    for label, result in failed:
        console.print(f"[red]FAIL[/] {escape(label)} through {escape(result.label)}: {escape(result.observed)}")
    lines = [scenario.explanation, "", f"Fix: {scenario.fix_summary}"]
    if scenario.finding:
        lines += ["", scenario.finding]
    if scenario.sources:
        lines += ["", "Sources: " + " ".join(scenario.sources)]
    console.print(Panel(escape("\n".join(lines)), title="why", title_align="left"))


def _run_dict(measured: McpMeasured) -> dict[str, Any]:
    run = measured.run
    return {"variant": run.variant, "proxy": run.proxy, "release": run.release, "replicas": run.replicas,
            "client_sdk": run.client_sdk,
            "wall_s": round(run.wall_s, 3), "passed": measured.passed, "client": client_saw(run),
            "requests_per_replica": run.counts(),
            "sessions": [session.as_dict() for session in run.sessions],
            "lone_gets": [asdict(alone) for alone in run.lone_gets],
            "checks": [{"label": r.label, "observed": r.observed, "passed": r.passed} for r in measured.results],
            "config": run.config}


def report_dict(outcome: McpOutcome) -> dict[str, Any]:
    scenario = outcome.scenario
    return {
        "scenario": scenario_fields(scenario, scenario.shown_hops),
        "verdict": outcome.verdict,
        "releases": outcome.releases,
        # As a token stream's report: each side's wall time and verdict (run-all plans from them).
        "variants": {name: {"wall_s": round(sum(m.run.wall_s for m in runs), 3), "verdict": outcome.verdict[name],
                            "runs": [_run_dict(m) for m in runs]} for name, runs in outcome.runs.items()},
        "provenance": outcome.provenance,
    }


def report_markdown(outcome: McpOutcome) -> str:
    scenario = outcome.scenario
    lines = [f"# {scenario.name}", "", scenario.symptom, "", provenance.one_line(outcome.provenance), "",
             "| variant | proxy | the client saw | the replicas answered | verdict |", "|---|---|---|---|---|"]
    for label, measured in rows(outcome):
        run = measured.run
        lines.append(f"| {label} | {proxy_shown(run)} | {client_saw(run)} | {replicas_saw(run)} | "
                     f"{expectation(outcome, measured)} |".replace("\n", " "))
    lines += ["", "## Why", "", scenario.explanation, "", f"Fix: {scenario.fix_summary}"]
    if scenario.finding:
        lines += ["", scenario.finding]
    return "\n".join(lines) + "\n"


def write_report(outcome: McpOutcome, folder: Path) -> dict[str, Path]:
    """reports/<scenario>/report.json and report.md (no timeline: a session is not a token stream)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"json": folder / "report.json", "md": folder / "report.md"}
    paths["json"].write_text(json.dumps(report_dict(outcome), indent=2, default=str))
    paths["md"].write_text(report_markdown(outcome))
    return paths
