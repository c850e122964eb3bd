"""`python -m labs list`: every scenario, in the form the reader can use.

The scenario name is the one thing a user copies (`make lab-NAME`, `pytest -k NAME`), so it is
never cut: piped or redirected, the list is plain text, one scenario per line, names padded to
one column (`grep`, `awk '{print $1}'` work); `--json` gives the same rows to programs; in a
terminal, a table whose name column never wraps (the other columns wrap instead), or plain
lines again when the terminal is too narrow for even that.
"""
from __future__ import annotations

import json
import sys
import os
from dataclasses import asdict, dataclass, field
from typing import IO, Sequence

from rich.console import Console
from rich.table import Table

from labs.findings import lab_command
from labs.scenario.model import Scenario
from labs.scenario.play import AnyScenario, proxy_kinds
from labs.lab.hops import hop_kind
from proxies.kinds import KINDS, choose_releases
from proxies.releases import CHOICE_VARIABLE

LOAD_SYMPTOM = "ramp 10 -> 1,000 concurrent streams per path; what breaks first"
# Below this many columns for layer, path and symptom together, a table's cells are a few words
# tall: plain lines read better.
MIN_OTHER_COLUMNS = 52


@dataclass(frozen=True)
class Row:
    name: str
    layer: str
    path: str  # "nginx 1.30 -> server", "client -> server": each proxy with the release it runs
    symptom: str
    command: str  # what runs it
    # Proxy -> the release the lab runs (its series and source), and the older releases it also
    # measures where they behave differently (Scenario.since).
    releases: dict[str, str] = field(default_factory=dict)
    also_on: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, scenario: AnyScenario) -> "Row":
        chosen = chosen_releases(scenario)
        also = [f"{change.proxy} {release.label}" for change in scenario.since
                for release in KINDS[change.proxy].releases if release.series != chosen.get(change.proxy)]
        return cls(scenario.name, scenario.layer, " -> ".join(hops_with_releases(scenario)), scenario.symptom,
                   lab_command(scenario.name),
                   {name: KINDS[name].release(series).label for name, series in chosen.items()}, also)


def chosen_releases(scenario: AnyScenario) -> dict[str, str]:
    """Proxy -> the series a run of this scenario uses (the lab's choice, default: current)."""
    return choose_releases(os.environ.get(CHOICE_VARIABLE), proxy_kinds(scenario), strict=False)


def hops_with_releases(scenario: AnyScenario) -> list[str]:
    """The path as shown (Scenario.shown_hops), each proxy with the release it runs: `nginx 1.30`."""
    chosen = chosen_releases(scenario)
    if not isinstance(scenario, Scenario):  # an MCP scenario: one proxy or the other, then the replicas
        return [" or ".join(f"{kind} {chosen[kind]}" for kind in scenario.proxies), scenario.shown_hops[-1]]
    hops = [f"{hop_kind(hop)} {chosen[hop_kind(hop)]}{shown.removeprefix(hop)}" if hop_kind(hop) in chosen else shown
            for hop, shown in zip(scenario.path, scenario.shown_hops)] or list(scenario.shown_hops[:-1])
    return [*hops, scenario.shown_hops[-1]]


def rows(scenarios: Sequence[AnyScenario]) -> list[Row]:
    """Every scenario, then the load lab (which is no Scenario: it ramps many paths)."""
    return [*(Row.of(s) for s in scenarios),
            Row("load", "load", "client -> each proxy -> server", LOAD_SYMPTOM, lab_command("load"))]


def as_json(listed: Sequence[Row]) -> str:
    return json.dumps([asdict(row) for row in listed], indent=2, ensure_ascii=False)


def as_text(listed: Sequence[Row]) -> str:
    """Aligned plain lines: name, layer, path, symptom. Long lines stay long (never cut)."""
    name_w = max(len(r.name) for r in listed)
    layer_w = max(len(r.layer) for r in listed)
    path_w = max(len(r.path) for r in listed)
    return "\n".join(f"{r.name:<{name_w}}  {r.layer:<{layer_w}}  {r.path:<{path_w}}  {r.symptom}".rstrip()
                     for r in listed)


def as_table(listed: Sequence[Row]) -> Table:
    table = Table(show_header=True, header_style="bold")
    name_w = max(len(r.name) for r in listed)
    # no_wrap + min_width: rich shrinks the wrappable columns first and never this one.
    table.add_column("scenario", no_wrap=True, min_width=name_w, overflow="ignore")
    table.add_column("layer", no_wrap=True)
    # The others wrap at spaces, and fold a word longer than their width rather than cut it.
    table.add_column("path", ratio=1, overflow="fold")
    table.add_column("symptom", ratio=2, overflow="fold")
    for r in listed:
        table.add_row(r.name, r.layer, r.path, r.symptom)
    return table


def fits_a_table(listed: Sequence[Row], width: int) -> bool:
    name_w = max(len(r.name) for r in listed)
    return width >= name_w + MIN_OTHER_COLUMNS


def print_list(scenarios: Sequence[AnyScenario], *, json_output: bool = False,
               out: IO[str] | None = None, console: Console | None = None) -> int:
    out = out or sys.stdout
    listed = rows(scenarios)
    try:
        if json_output:
            out.write(as_json(listed) + "\n")
        elif console is None and not out.isatty():
            out.write(as_text(listed) + "\n")
        else:
            console = console or Console(file=out)
            if fits_a_table(listed, console.width):
                console.print(as_table(listed))
            else:
                console.print(as_text(listed), soft_wrap=True, markup=False, highlight=False)
        out.flush()
    except BrokenPipeError:  # `python -m labs list | head`: the reader has all it wanted
        _silence_stdout()
    return 0


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
