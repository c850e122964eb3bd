"""Show a scenario's outcome: a side-by-side table in the terminal, and report.json/.md/timeline.png.

Both the terminal and report.md are built from the same rows, so they always agree.
"""
from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from labs import provenance
from labs.client.durations import milliseconds
from labs.client.results import aggregate
from labs.scenario.runner import ScenarioOutcome
from labs.scenario.model import Run, Scenario, VariantName

if TYPE_CHECKING:
    from labs.scenario.mcp_model import McpScenario
    from labs.scenario.mcp_runner import McpOutcome


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def metric_rows(outcome: ScenarioOutcome) -> list[tuple[str, dict[VariantName, str]]]:
    """(row label, value per variant): single-stream rows, or aggregates for many streams."""
    runs = outcome.runs
    rows: list[tuple[str, dict[VariantName, str]]] = []

    def row(label: str, value_of) -> None:
        rows.append((label, {name: value_of(run) for name, run in runs.items()}))

    many = any(len(run.results) > 1 for run in runs.values())
    if many:
        row("streams", lambda r: str(len(r.results)))
        row("outcomes", lambda r: ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes().items())))
        row("HTTP statuses", lambda r: ", ".join(f"{k} x{v}" for k, v in sorted(aggregate(r.results)["statuses"].items())))
        row("TTFT p50", lambda r: milliseconds(aggregate(r.results)["ttft_p50_s"], grouped=True))
        row("TTFT max", lambda r: milliseconds(aggregate(r.results)["ttft_max_s"], grouped=True))
        row("gap p99", lambda r: milliseconds(aggregate(r.results)["gap_p99_s"], grouped=True))
    else:
        row("outcome", lambda r: r.first.outcome)
        row("HTTP status", lambda r: _num(r.first.status))
        row("TTFB", lambda r: milliseconds(r.first.ttfb_s, grouped=True))
        row("TTFT", lambda r: milliseconds(r.first.ttft_s, grouped=True))
        row("E2E", lambda r: milliseconds(r.first.e2e_s, grouped=True))
        row("content events", lambda r: str(r.first.content_events))
        row("reads carrying them (bursts)", lambda r: str(r.first.bursts))
        row("events per read, max", lambda r: _num(r.first.summary()["events_per_read_max"]))
        row("gap p50 / p99", lambda r: (f"{milliseconds(r.first.summary()['gap_p50_s'], grouped=True)} / "
                                        f"{milliseconds(r.first.summary()['gap_p99_s'], grouped=True)}"))
        if any(r.first.hop_delays for r in runs.values()):
            row("hop delay p50", lambda r: milliseconds(r.first.summary()["hop_p50_s"], grouped=True))
        row("Content-Encoding", lambda r: r.first.content_encoding or "none")
        row("heartbeats seen", lambda r: str(r.first.heartbeats))
    for metric in outcome.scenario.server_metrics:
        row(f"server: {metric}", lambda r, m=metric: _num(r.metric(m)))
    for stat in outcome.scenario.proxy_stats:
        row(f"envoy: {stat}", lambda r, s=stat: _num(sum(v for stats in r.proxy_stats.values()
                                                          for k, v in stats.items() if k.endswith(s))))
    if outcome.scenario.bisect:
        # Each variant's hops listen on their own ports: rows go by entry point, port left out.
        labels = list(next(iter(runs.values())).hops.keys())
        for index, label in enumerate(labels):
            row(f"TTFT {label.rsplit(':', 1)[0]}", lambda r, i=index: (
                milliseconds(list(r.hops.values())[i][0].ttft_s, grouped=True) if i < len(r.hops) else "-"))
    return rows


def release_label(outcome: ScenarioOutcome) -> str:
    """The releases this outcome ran of the proxies whose behaviour changed (Scenario.since), as
    its provenance names them (`nginx 1.30.6 (Debian sid)`), else by series (`nginx 1.30`)."""
    origins = outcome.provenance.get("proxies") or {}
    named = [change.proxy for change in outcome.scenario.since] or list(outcome.releases)
    return ", ".join(provenance.origin_text(proxy, origins[proxy]) if "version" in origins.get(proxy, {})
                     else f"{proxy} {outcome.releases.get(proxy, '')}".strip() for proxy in dict.fromkeys(named))


BY_RELEASE_COLUMNS = ("release", "variant", "verdict", "TTFT", "reads")


def release_rows(outcome: ScenarioOutcome) -> list[tuple[str, str, str, str, str]]:
    """One row per release and variant (release, variant, verdict, TTFT, reads of the first
    stream); empty when the scenario ran on one release only."""
    if not outcome.older:
        return []
    rows = []
    for each in outcome.every_release:
        rows += [(release_label(each), name, each.verdict[name], *_first_stream(run)) for name, run in each.runs.items()]
        if each.own_defaults is not None:
            rows.append((release_label(each), OWN_DEFAULTS, own_defaults_verdict(each), *_first_stream(each.own_defaults)))
    return rows


# The broken variant's client and server with the proxy left at its own defaults (Since.own_defaults).
OWN_DEFAULTS = "own defaults"


def own_defaults_verdict(outcome: ScenarioOutcome) -> str:
    return "symptom reproduced" if all(c.passed for c in outcome.own_defaults_checks) else "no symptom"


def _first_stream(run: Run) -> tuple[str, str]:
    """(TTFT, reads) of the run's first stream."""
    return (milliseconds(run.first.ttft_s, grouped=True), str(run.first.bursts)) if run.results else ("-", "-")


def check_rows(outcome: ScenarioOutcome) -> list[tuple[VariantName, str, str, bool]]:
    return [(name, c.label, c.observed, c.passed)
            for name, results in outcome.checks.items() for c in results]


def config_diff(outcome: ScenarioOutcome) -> str:
    """The broken and fixed configs of each hop as a unified diff, plus request/server changes."""
    runs, scenario = outcome.runs, outcome.scenario
    parts: list[str] = []
    if "broken" in runs and "fixed" in runs:
        broken, fixed = runs["broken"], runs["fixed"]
        for (b_name, b_text), (f_name, f_text) in zip(broken.configs.items(), fixed.configs.items()):
            proxy = b_name.split(":", 1)[0]
            diff = difflib.unified_diff(
                _without_ports(b_text).splitlines(), _without_ports(f_text).splitlines(),
                f"{proxy} (broken)", f"{proxy} (fixed)", lineterm="", n=1)
            parts.extend(diff)
    parts.extend(_knob_diff("lab request fields", scenario.broken.lab, scenario.variant("fixed").lab))
    parts.extend(_knob_diff("server flags", {"args": " ".join(scenario.broken.server_args)},
                            {"args": " ".join(scenario.variant("fixed").server_args)}))
    parts.extend(_knob_diff("client options", scenario.broken.client, scenario.variant("fixed").client))
    return "\n".join(parts)


def _without_ports(text: str) -> str:
    """Ports are taken at run time, so both variants differ there; the diff should not show it."""
    import re
    text = re.sub(r"(--port|-p) \d+", r"\1 PORT", text)  # a command line's own port (uvicorn, next)
    return re.sub(r"127\.0\.0\.1:\d+|port_value: \d+", "127.0.0.1:PORT", text)


def _knob_diff(title: str, before: Any, after: Any) -> list[str]:
    if before == after:
        return []
    return [f"--- {title} (broken)", f"+++ {title} (fixed)",
            *(f"-{k}: {json.dumps(v)}" for k, v in before.items() if after.get(k) != v),
            *(f"+{k}: {json.dumps(v)}" for k, v in after.items() if before.get(k) != v)]


# ---- terminal ---------------------------------------------------------------------------------

def print_outcome(outcome: ScenarioOutcome, console: Console | None = None, *, diff: bool = True) -> None:
    console = console or Console()
    scenario = outcome.scenario
    console.rule(f"[bold]{scenario.name}[/bold]: {scenario.symptom}")
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("measured")
    for name in outcome.runs:
        table.add_column(name, justify="right")
    for label, values in metric_rows(outcome):
        table.add_row(label, *(values[name] for name in outcome.runs))
    verdicts = outcome.verdict
    table.add_row("[bold]verdict[/bold]", *(
        f"[{'green' if outcome.passed(name) else 'red'}]{verdicts[name]}[/]" for name in outcome.runs))
    console.print(table)
    if rows := release_rows(outcome):
        by_release = Table(show_header=True, header_style="bold", title="by release", title_justify="left")
        for column in BY_RELEASE_COLUMNS:
            by_release.add_column(column, justify="right" if column in ("TTFT", "reads") else "left")
        for row in rows:
            by_release.add_row(*(escape(cell) for cell in row))
        console.print(by_release)
        for each in outcome.every_release:
            console.print(f"[dim]{escape(provenance.one_line(each.provenance))}[/]")
    checks = Table(show_header=True, header_style="bold", title="checks", title_justify="left")
    for column in ("variant", "expectation", "observed", ""):
        checks.add_column(column)
    for name, label, observed, passed in check_rows(outcome):
        checks.add_row(name, escape(label), escape(observed), "[green]ok[/]" if passed else "[red]FAIL[/]")
    console.print(checks)
    if diff:
        text = config_diff(outcome)
        if text:
            console.print(Panel(Syntax(text, "diff", theme="ansi_dark", word_wrap=True),
                                title="what the fix changes", title_align="left"))
    console.print(Panel(escape(_explanation_text(scenario)), title="why", title_align="left"))
    evidence = [line for run in outcome.runs.values() for line in _evidence_lines(run)]
    if evidence:
        console.print(Panel(escape("\n".join(evidence)), title="the proxies' own evidence", title_align="left"))


def _explanation_text(scenario: Scenario) -> str:
    lines = [scenario.explanation, "", f"Fix: {scenario.fix_summary}"]
    if scenario.finding:
        lines += ["", f"Measured here: {scenario.finding}" if not scenario.finding.startswith("Measured")
                  else scenario.finding]
    if scenario.scaled:
        lines += ["", "Scaled down so the lab takes seconds: " + "; ".join(
            f"{s.setting} {s.lab_value} stands for {s.real_default}" for s in scenario.scaled)]
    if scenario.sources:
        lines += ["", "Sources: " + " ".join(scenario.sources)]
    return "\n".join(lines)


def _evidence_lines(run: Run, limit: int = 8) -> list[str]:
    return [f"[{run.variant}] {line}" for line in run.evidence[-limit:]]


# ---- files ------------------------------------------------------------------------------------

def write_report(outcome: ScenarioOutcome, folder: Path) -> dict[str, Path]:
    """reports/<scenario>/report.json, report.md and timeline.png (and hops.png for a bisected chain)."""
    from labs.scenario.timeline import plot_timeline

    folder.mkdir(parents=True, exist_ok=True)
    paths = {"json": folder / "report.json", "md": folder / "report.md", "png": folder / "timeline.png"}
    paths["json"].write_text(json.dumps(report_dict(outcome), indent=2, default=str))
    paths["md"].write_text(report_markdown(outcome))
    series = {f"{name}: {outcome.verdict[name]}": run.results for name, run in outcome.runs.items()}
    plot_timeline(series, paths["png"], title=f"{outcome.scenario.name}: {outcome.scenario.symptom}",
                  subtitle=f"fix: {outcome.scenario.fix_summary}")
    broken = outcome.runs.get("broken")
    if outcome.scenario.bisect and broken is not None and broken.hops:
        # The same stream entering at each hop in turn, then direct: where the lump first appears.
        paths["hops"] = folder / "hops.png"
        plot_timeline(broken.hops, paths["hops"], title=f"{outcome.scenario.name}: bisecting the chain",
                      subtitle="broken variant; the innermost entry that still shows the lump is the culprit")
    return paths


def scenario_fields(scenario: Scenario | McpScenario, path: Sequence[str]) -> dict[str, Any]:
    """What report.json says of the scenario itself, whatever its workload."""
    return {"name": scenario.name, "layer": scenario.layer, "symptom": scenario.symptom,
            "path": list(path), "explanation": scenario.explanation,
            "fix": scenario.fix_summary, "finding": scenario.finding,
            "scaled": [vars(s) for s in scenario.scaled], "sources": list(scenario.sources)}


def report_dict(outcome: ScenarioOutcome) -> dict[str, Any]:
    scenario = outcome.scenario
    return {
        "scenario": scenario_fields(scenario, scenario.path),
        "verdict": outcome.verdict,
        "provenance": outcome.provenance,
        "releases": outcome.releases,
        # The same variants on each older release (Scenario.since), the current one first.
        "by_release": [{
            "release": release_label(each), "releases": each.releases, "provenance": each.provenance,
            "verdict": each.verdict,
            "variants": {name: {"passed": each.passed(name), "checks": [vars(c) for c in each.checks[name]],
                                "ttft_s": run.first.ttft_s if run.results else None,
                                "reads": run.first.bursts if run.results else None,
                                "aggregate": aggregate(run.results), "wall_s": run.wall_s}
                         for name, run in each.runs.items()},
            "own_defaults": None if each.own_defaults is None else {
                "verdict": own_defaults_verdict(each), "checks": [vars(c) for c in each.own_defaults_checks],
                "ttft_s": each.own_defaults.first.ttft_s if each.own_defaults.results else None,
                "reads": each.own_defaults.first.bursts if each.own_defaults.results else None,
                "configs": each.own_defaults.configs},
        } for each in outcome.every_release] if outcome.older else [],
        "variants": {
            name: {
                "passed": outcome.passed(name),
                "checks": [vars(c) for c in outcome.checks[name]],
                "streams": [r.to_dict() for r in run.results],
                "aggregate": aggregate(run.results),
                "server_delta": run.server_delta,
                "proxy_stats": run.proxy_stats,
                "evidence": run.evidence,
                "configs": run.configs,
                "hops": {label: [r.to_dict() for r in results] for label, results in run.hops.items()},
                "wall_s": run.wall_s,
            } for name, run in outcome.runs.items()
        },
    }


def report_markdown(outcome: ScenarioOutcome) -> str:
    scenario = outcome.scenario
    names = list(outcome.runs)
    lines = [f"# {scenario.name}", "", f"**Symptom:** {scenario.symptom}", ""]
    if outcome.provenance:
        lines += [f"**Provenance:** {provenance.one_line(outcome.provenance)}", ""]
    lines += ["| measured | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for label, values in metric_rows(outcome):
        lines.append(f"| {label} | " + " | ".join(values[n] for n in names) + " |")
    lines.append("| **verdict** | " + " | ".join(f"**{outcome.verdict[n]}**" for n in names) + " |")
    if rows := release_rows(outcome):
        lines += ["", "## By release", "", "| " + " | ".join(BY_RELEASE_COLUMNS) + " |", "|---|---|---|---:|---:|",
                  *("| " + " | ".join(row) + " |" for row in rows), ""]
        lines += [f"- {provenance.one_line(each.provenance)}" for each in outcome.every_release]
    lines += ["", "## Checks", "", "| variant | expectation | observed | |", "|---|---|---|---|"]
    for name, label, observed, passed in check_rows(outcome):
        lines.append(f"| {name} | {label} | {observed} | {'ok' if passed else 'FAIL'} |")
    diff = config_diff(outcome)
    if diff:
        lines += ["", "## What the fix changes", "", "```diff", diff, "```"]
    lines += ["", "## Why", "", _explanation_text(scenario), "", "![timeline](timeline.png)"]
    if scenario.bisect:
        lines += ["", "The broken stream entering at each hop in turn:", "", "![hops](hops.png)"]
    evidence = [line for run in outcome.runs.values() for line in _evidence_lines(run)]
    if evidence:
        lines += ["", "## The proxies' own evidence", "", "```", *evidence, "```"]
    return "\n".join(lines) + "\n"


def write_index(outcomes: Sequence[ScenarioOutcome | McpOutcome], folder: Path,
                errors: Mapping[str, str] | None = None) -> Path:
    """reports/index.md: each scenario's verdicts and wall time; `errors`: those that could not run."""
    lines = ["# streamlab: every scenario", "", "| scenario | symptom | broken | fixed | wall |",
             "|---|---|---|---|---:|"]
    for outcome in outcomes:
        v = outcome.verdict
        lines.append(f"| [{outcome.scenario.name}]({outcome.scenario.name}/report.md) | "
                     f"{outcome.scenario.symptom} | {v.get('broken', '-')} | {v.get('fixed', '-')} | "
                     f"{outcome.wall_s:.1f} s |")
    for name, error in (errors or {}).items():
        lines.append(f"| {name} | could not run: {error.replace('|', '&#124;')} | - | - | - |")
    if outcomes and outcomes[0].provenance:
        lines += ["", f"**Provenance** (of the first): {provenance.one_line(outcomes[0].provenance)}"]
    path = folder / "index.md"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
