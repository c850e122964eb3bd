"""`make lab-all` (`python -m labs run-all`): every scenario, one shared lab, a progress bar with
the time left, one line per scenario as it ends, then a one-screen summary and reports/index.md.

Each scenario's full report is in reports/<scenario>/report.md (`make lab-NAME` prints it all).
A scenario that cannot run (a proxy that will not start, say) is reported as an error and the
others still run; the exit status is 1 when any scenario did not reproduce (unless the release run
fixed its symptom: Since.ends_symptom), was not cured, or could not run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labs.progress import WorkBar, clock
from labs.scenario.mcp_model import McpScenario
from labs.scenario.model import VARIANTS, Workload
from labs.scenario.play import AnyScenario

# Per scenario, beyond its streams: proxies to start, the server to drain, the report to draw.
OVERHEAD_S = 2.0
# One MCP variant through one proxy: the replicas start (about 2 s each on mcp 1.30), then the sessions.
MCP_RUN_S = 8.0


@dataclass(frozen=True)
class SummaryRow:
    name: str
    reproduced: bool | None = None  # None: it could not run
    cured: bool | None = None
    wall_s: float = 0.0
    error: str | None = None
    # The release run carries the proxy's fix for this symptom (Since.ends_symptom): it must not reproduce.
    gone: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.cured) and bool(self.reproduced) != self.gone


def planned_s(scenario: AnyScenario, reports: Path) -> float:
    """How long the scenario should take: its last run's wall time when a report is there,
    else its workload's stream time, twice (broken and fixed), plus the per-scenario overhead
    (an MCP scenario: MCP_RUN_S per proxy and variant)."""
    try:
        last = json.loads((reports / scenario.name / "report.json").read_text())
        walls = [v["wall_s"] for v in last["variants"].values()]
        if walls and all(isinstance(w, (int, float)) for w in walls):
            return float(sum(walls)) + OVERHEAD_S
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if isinstance(scenario, McpScenario):
        return MCP_RUN_S * len(scenario.runs()) + OVERHEAD_S
    return sum(stream_s(scenario.workload, scenario.variant(v).lab) for v in VARIANTS) + OVERHEAD_S


def stream_s(workload: Workload, variant_lab: Mapping[str, Any] | None = None) -> float:
    """The workload's own timing under a variant's knobs: silences, then its script's words at
    its pace, per wave."""
    knobs = workload.knobs(variant_lab)
    tokens = max(1, len(str(knobs["script"]).split()))
    rate = float(knobs["tokens_per_s"])
    waves = 1 if workload.streams <= 1 else -(-workload.streams // max(1, workload.concurrency))
    return waves * (workload.first_due_s(variant_lab) + tokens / rate)


def summary_table(rows: Sequence[SummaryRow], total_s: float) -> Table:
    reproduced = sum(1 for r in rows if r.reproduced)
    gone = sum(1 for r in rows if r.gone and not r.reproduced and not r.error)
    cured = sum(1 for r in rows if r.cured)
    errors = sum(1 for r in rows if r.error)
    table = Table(title="every scenario", title_justify="left", show_header=True, header_style="bold",
                  caption=f"{reproduced}/{len(rows)} reproduced"
                          + (f" ({gone} gone on a release that fixed them)" if gone else "")
                          + f", {cured}/{len(rows)} cured"
                          + (f", {errors} could not run" if errors else "") + f"; {clock(total_s)} in all",
                  caption_justify="left")
    # Every cell is short, so the table is as narrow as its longest scenario name: 80 columns do.
    table.add_column("scenario", no_wrap=True, min_width=max((len(r.name) for r in rows), default=8))
    table.add_column("broken", no_wrap=True)
    table.add_column("fixed", no_wrap=True)
    table.add_column("wall", justify="right", no_wrap=True)
    for r in rows:
        if r.error:
            table.add_row(r.name, "[red]could not run[/]", "-", clock(r.wall_s))
            continue
        broken = ("[red]reproduced (unexpected)[/]" if r.reproduced else "[green]gone here[/]") if r.gone \
            else ("[green]reproduced[/]" if r.reproduced else "[red]NOT reproduced[/]")
        table.add_row(r.name, broken, "[green]cured[/]" if r.cured else "[red]NOT cured[/]", clock(r.wall_s))
    return table


def run_all(scenarios: Sequence[AnyScenario], runtime: str | None, out: Path,
            console: Console | None = None) -> int:
    from labs.scenario import play, report
    from labs.scenario.runner import Lab

    console = console or Console()
    plan = {s.name: planned_s(s, out) for s in scenarios}
    rows: list[SummaryRow] = []
    outcomes = []
    errors: dict[str, str] = {}
    started = time.monotonic()
    skipped: list[str] = []
    with WorkBar(console, sum(plan.values()), "lab-all") as bar, \
            Lab(runtime=runtime, progress=bar.say) as lab:
        for index, scenario in enumerate(scenarios, 1):
            if (reason := play.cannot_run(scenario, lab)) is not None:
                skipped.append(scenario.name)
                bar.console.print(f"[yellow]-[/] {scenario.name}: skipped: {escape(reason)}")
                bar.advance(plan[scenario.name])
                continue
            bar.say(f"{scenario.name} ({index}/{len(scenarios)})")
            began = time.monotonic()
            try:
                outcome = play.run(lab, scenario)
                paths = play.write_report(outcome, out / scenario.name)
            except Exception as exc:  # noqa: BLE001 - one scenario must not lose the others
                error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                errors[scenario.name] = error
                rows.append(SummaryRow(scenario.name, wall_s=time.monotonic() - began, error=error))
                bar.console.print(f"[red]✗[/] {scenario.name}: could not run: {escape(error)}")
            else:
                outcomes.append(outcome)
                row = SummaryRow(scenario.name, outcome.passed("broken"), outcome.passed("fixed"),
                                 time.monotonic() - began, gone=scenario.symptom_ended(outcome.releases))
                rows.append(row)
                verdict = outcome.verdict
                mark = "[green]✓[/]" if row.ok else "[red]✗[/]"
                bar.console.print(f"{mark} {scenario.name}: {verdict['broken']} / {verdict['fixed']} "
                                  f"({row.wall_s:.1f} s)  [dim]{paths['md']}[/]")
            bar.advance(plan[scenario.name])
        bar.finish(f"{len(scenarios) - len(skipped)} scenarios")
    console.print(summary_table(rows, time.monotonic() - started))
    for name, error in errors.items():
        console.print(f"[red]{name}[/]: {escape(error)}")
    if skipped:
        console.print(f"skipped in the {lab.runtime.name} runtime: {', '.join(skipped)}")
    console.print(f"index: {report.write_index(outcomes, out, errors)}")
    return 0 if all(r.ok for r in rows) else 1
