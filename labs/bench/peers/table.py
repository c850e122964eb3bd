"""The side-by-side table of `make bench-peers`: the lab client, AIPerf and guidellm, and the
server's own TTFT from /metrics, one column each, per stream count.

Each tool's figures are what its own output files say (parsed by labs/bench/peer_*.py), with its
own definitions (docs/metrics.md, "The peers' definitions"); a tool that could not run (install
failed, run failed, unparsable output) keeps its column with the reason instead of numbers.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from labs.bench.peers.figures import Figures
from labs.client.durations import milliseconds

TOOLS = ("lab", "aiperf", "guidellm")
TITLES = {"lab": "lab client", "aiperf": "AIPerf 0.13.0", "guidellm": "guidellm 0.8.1"}


@dataclass
class ToolRun:
    """A tool at one stream count: its figures, or why there are none, and what it cost."""

    tool: str
    streams: int
    figures: Figures | None = None
    missing: str | None = None
    cpu_s: float | None = None  # the tool's whole process tree (docs/metrics.md)
    wall_s: float | None = None
    processes: int | None = None
    server: dict[str, Any] = field(default_factory=dict)  # the server's /metrics over the run
    command: str = ""

    @property
    def cpu_pct(self) -> float | None:
        return None if self.cpu_s is None or not self.wall_s else 100 * self.cpu_s / self.wall_s

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cpu_pct"] = self.cpu_pct
        return out


# A cell of a table whose column header names the unit.
_ms_cell = partial(milliseconds, digits=1, unit=False)


def _per_request(total: int | None, requests: int) -> str:
    return "-" if total is None or not requests else f"{total / requests:.2f}"


Row = tuple[str, Callable[[ToolRun], str]]


def _fig(getter: Callable[[Figures], str]) -> Callable[[ToolRun], str]:
    return lambda run: getter(run.figures) if run.figures else "-"


ROWS: tuple[Row, ...] = (
    ("completed / failed", _fig(lambda f: f"{f.requests} / {f.failed}")),
    ("TTFT mean (ms)", _fig(lambda f: _ms_cell(f.ttft_mean_s))),
    ("TTFT p50 (ms)", _fig(lambda f: _ms_cell(f.ttft_p50_s))),
    ("TTFT p99 (ms)", _fig(lambda f: _ms_cell(f.ttft_p99_s))),
    ("ITL mean (ms, own definition)", _fig(lambda f: _ms_cell(f.itl_mean_s))),
    ("ITL p50 (ms, own definition)", _fig(lambda f: _ms_cell(f.itl_p50_s))),
    ("gap p99 (ms)", _fig(lambda f: _ms_cell(f.gap_p99_s))),
    ("E2E mean (ms)", _fig(lambda f: _ms_cell(f.e2e_mean_s))),
    ("E2E p50 (ms)", _fig(lambda f: _ms_cell(f.e2e_p50_s))),
    ("E2E p99 (ms)", _fig(lambda f: _ms_cell(f.e2e_p99_s))),
    ("output tokens / request (tool's count)", _fig(lambda f: _per_request(f.output_tokens, f.requests))),
    ("usage tokens / request (as the tool read it)", _fig(lambda f: _per_request(f.usage_tokens, f.requests))),
    ("server: tokens / request over the run", lambda r: _server_tokens(r.server)),
    ("server: TTFT mean (ms) over the run", lambda r: _ms_cell(r.server.get("ttft_mean_s"))),
    ("TTFT mean minus the server's (ms)", lambda r: _client_side(r)),
    ("tool CPU s (% of one core)", lambda r: "-" if r.cpu_s is None else f"{r.cpu_s:.2f} ({r.cpu_pct:.0f}%)"),
    ("tool CPU ms / completed request", lambda r: "-" if r.cpu_s is None or not r.figures
     or not r.figures.requests else f"{1e3 * r.cpu_s / r.figures.requests:.0f}"),
    ("tool wall s / processes", lambda r: "-" if r.wall_s is None else f"{r.wall_s:.1f} / {r.processes}"),
)


def _client_side(run: ToolRun) -> str:
    """What the tool adds to the server's own TTFT: its client side, loopback and its clock."""
    server = run.server.get("ttft_mean_s")
    if not run.figures or run.figures.ttft_mean_s is None or server is None:
        return "-"
    return f"{(run.figures.ttft_mean_s - server) * 1e3:+.1f}"


def _server_tokens(server: Mapping[str, Any]) -> str:
    requests, tokens = server.get("requests"), server.get("tokens")
    return "-" if not requests or tokens is None else f"{tokens / requests:.2f} ({requests:.0f} requests)"


def table(runs: Sequence[ToolRun], streams: int) -> tuple[list[str], list[list[str]]]:
    """The header and rows for one stream count, one column per tool (missing ones too)."""
    by_tool = {run.tool: run for run in runs if run.streams == streams}
    columns = [by_tool.get(tool) or ToolRun(tool, streams, missing="not run") for tool in TOOLS]
    header = ["metric"] + [TITLES[run.tool] for run in columns]
    rows = [[label] + [("n/a" if run.missing else cell(run)) for run in columns] for label, cell in ROWS]
    return header, rows


def _streams(n: int) -> str:
    return f"{n} stream{'s' if n != 1 else ''}"


def missing_lines(runs: Sequence[ToolRun]) -> list[str]:
    """One clear line per tool that has no figures, and every tool's notes."""
    lines = [f"- {TITLES[run.tool]} at {_streams(run.streams)}: **no figures** ({run.missing})"
             for run in runs if run.missing]
    for run in runs:
        for note in run.figures.notes if run.figures else ():
            lines.append(f"- {TITLES[run.tool]} at {_streams(run.streams)}: {note}")
    return lines


def markdown(result: Mapping[str, Any], runs: Sequence[ToolRun]) -> str:
    setup = result["setup"]
    lines = [f"# The lab client beside AIPerf and guidellm ({setup['engine']} engine)", "",
             f"Command: `{result['command']}`. One server (`{setup['server_args']}`), the same pacing "
             f"for every tool: the `lab` object (`{setup['lab_shown']}`: first token after "
             f"{milliseconds(setup['first_token_delay_s'])}, {setup['tokens']} tokens at "
             f"{setup['tokens_per_s']:g} tok/s, one token per event), max {setup['tokens']} tokens. "
             f"CPU is each tool's whole process tree, start-up included. Ideal: TTFT "
             f"{milliseconds(setup['ideal_ttft_s'])}, gaps {1e3 / setup['tokens_per_s']:.0f} ms, E2E "
             f"{milliseconds(setup['ideal_e2e_s'])}. Each tool's own definitions: docs/metrics.md.", ""]
    for streams in setup["streams"]:
        header, rows = table(runs, streams)
        requests = setup["requests"][str(streams)]
        lines += [f"## {_streams(streams)} ({requests} requests per tool)", "",
                  "| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    extra = missing_lines(runs)
    if extra:
        lines += ["Notes:", "", *extra, ""]
    lines += [f"Wall time: {result['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


def print_rich(result: Mapping[str, Any], runs: Sequence[ToolRun]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if Console().is_terminal else 110)
    for streams in result["setup"]["streams"]:
        header, rows = table(runs, streams)
        view = Table(title=f"{_streams(streams)}: lab client, AIPerf, guidellm")
        for i, name in enumerate(header):
            view.add_column(name, justify="left" if i == 0 else "right")
        for row in rows:
            view.add_row(*row)
        console.print(view)
    for line in missing_lines(runs):
        console.print(line)
