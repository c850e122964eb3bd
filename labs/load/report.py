"""The load lab's report: terminal tables (rich), report.json, report.md and one picture.

The picture has three panels against concurrency (log scale), one line per path: completed
streams (% of those opened), delivered tok/s (% of the ideal streams x rate) and TTFT p99.
Broken limits are dashed, fixed configs solid, direct black, so "where does each line fall off"
reads at a glance.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from labs.client.durations import milliseconds  # noqa: E402
from labs.provenance import one_line  # noqa: E402
from labs.load.analysis import PathResult  # noqa: E402
from labs.load.results import MAX_GAP_FACTOR, MAX_TTFT_P99_S, MIN_RATE_PCT, StepResult  # noqa: E402

COLOURS = {"nginx": "#009639", "haproxy": "#1f77b4", "envoy": "#ac3bd3", None: "#222222"}
TEACHING_COLOURS = ("#e66101", "#8c510a", "#7f7f7f", "#d01c8b")  # rows that are not a proxy


def _ms_cell(seconds: float | None) -> str:
    """A figure in a column whose header says ms: a decimal below 10 ms, where whole
    milliseconds would round a fast path's figures together."""
    digits = 1 if seconds is not None and seconds < 0.01 else 0
    return milliseconds(seconds, digits=digits, unit=False, grouped=True)


def _failed(step: StepResult) -> str:
    bad = {k: v for k, v in step.outcomes.items() if k != "complete"}
    return ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) or "0"


def _cpu(usage: Mapping[str, Any] | None) -> str:
    return "-" if not usage else f"{usage['cpu_pct']:.0f}%"


def _fds(usage: Mapping[str, Any] | None) -> str:
    return "-" if not usage else f"{usage['fds_peak']}"


STEP_COLUMNS = ("streams", "complete", "failed", "TTFT p50/p99 ms", "gap p50/p99 (steady p99) ms",
                "tok/s (% ideal)", "CPU srv/proxy/client (machine)", "fds srv/proxy",
                "acceptq entry/srv")


def step_row(step: StepResult) -> list[str]:
    return [
        f"{step.concurrency:,}", f"{step.completed:,}", _failed(step),
        f"{_ms_cell(step.ttft_p50_s)} / {_ms_cell(step.ttft_p99_s)}",
        f"{_ms_cell(step.gap_p50_s)} / {_ms_cell(step.gap_p99_s)} ({_ms_cell(step.steady_gap_p99_s)})",
        f"{step.tok_s:,.0f} ({step.rate_pct:.0f}%)",
        f"{_cpu(step.server)} / {_cpu(step.proxy)} / {step.client_cpu_pct:.0f}% "
        f"({step.machine_busy_pct:.0f}%)",
        f"{_fds(step.server)} / {_fds(step.proxy)}",
        f"{step.accept_queue_peak} / {step.server_accept_queue_peak}" if step.proxy
        else f"- / {step.server_accept_queue_peak}",
    ]


def limit_text(result: PathResult) -> tuple[str, str, str]:
    """(at, first limit, evidence) for one path."""
    if result.error:
        return "-", "path did not run", result.error
    hit = result.first_limit
    if hit is None and (cut := result.inconclusive) is not None:
        step, limits = cut
        healthy = [s.concurrency for s in result.steps if s.healthy and s.concurrency < step.concurrency]
        below = (f"healthy up to {max(healthy):,} streams; " if healthy else "")
        return (f"{step.concurrency:,}", "inconclusive: limited by the client, not the path",
                f"{below}from {step.concurrency:,} streams the client machine's CPU ran out first "
                f"({'; '.join(x.name for x in limits)}), so these steps say nothing about the path: "
                f"rerun with more client CPU (--locust --workers N, or workers on other machines) "
                f"or fewer streams. " + " Also: ".join(x.evidence for x in limits))
    if hit is None:
        top = max((s.concurrency for s in result.steps), default=0)
        return "-", f"none up to {top:,} streams", "every step healthy"
    step, limits = hit
    names = "; ".join(limit.name for limit in limits)
    # Every limit's evidence, the step's symptom once (each evidence starts with it).
    evidence = [limits[0].evidence] if limits else []
    evidence += [limit.evidence.split("Evidence: ", 1)[-1] for limit in limits[1:]]
    return f"{step.concurrency:,}", names, " Also: ".join(evidence)


def print_path(result: PathResult, console: Console) -> None:
    table = Table(title=f"{result.path.name}: {result.path.limit}", title_justify="left")
    for column in STEP_COLUMNS:
        table.add_column(column, justify="right")
    for step in result.steps:
        table.add_row(*step_row(step), style=None if step.healthy else "red")
    console.print(table)
    at, name, evidence = limit_text(result)
    if result.first_limit is None and result.inconclusive is not None:
        console.print(f"  [bold yellow]{name}[/] (from {at} streams)")
    else:
        console.print(f"  first limit: [bold]{name}[/]" + (f" at {at} streams" if at != "-" else ""))
    if evidence:
        console.print(f"  {evidence}", soft_wrap=True)


def print_summary(results: Sequence[PathResult], console: Console) -> None:
    table = Table(title="first limit hit, per path", title_justify="left")
    for column in ("path", "config", "at streams", "first limit"):
        table.add_column(column)
    for r in results:
        at, name, _ = limit_text(r)
        table.add_row(r.path.name, r.path.limit, at, name)
    console.print(table)


# ---- files -----------------------------------------------------------------------------------


def report_dict(results: Sequence[PathResult], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"meta": dict(meta), "healthy_when": {
        "failed": 0, "rate_pct_min": MIN_RATE_PCT, "ttft_p99_s_max": MAX_TTFT_P99_S,
        "gap_p99_max": f"{MAX_GAP_FACTOR} x the token interval"},
        "paths": [r.to_dict() for r in results]}


def markdown(results: Sequence[PathResult], meta: Mapping[str, Any]) -> str:
    rate, duration = meta.get("tokens_per_s", 20), meta.get("duration_s", 8)
    lines = [
        "# Load lab: concurrent streams, and what breaks first",
        "",
        meta.get("intro") or
        f"Each step opens N streams at once; the server (`--engine synthetic`, the same tokens "
        f"without a model) paces each at {rate:g} tok/s for {duration:g} s (the tiny-model row: "
        f"2 s). Ideal aggregate = N x {rate:g} tok/s; delivered = content events received per "
        f"second while every stream was open (from the last first token to the first end), so "
        f"the connect burst is judged by TTFT and not twice; steady gap p99 is the gap p99 inside that "
        f"window (the load once every stream is open, without the admission burst). A step is healthy when every stream completed, "
        f">= {MIN_RATE_PCT:.0f}% of the ideal arrived, TTFT p99 <= {MAX_TTFT_P99_S:g} s and gap "
        f"p99 <= {MAX_GAP_FACTOR:g} x the token interval. CPU is % of one core (the machine has "
        f"2, shared by client, proxy, server and whatever else runs: machine is all of it); fds "
        f"are peaks; acceptq is the peak of the accept queue at the entry (proxy) and the server's "
        f"listen sockets. The client is the lab's lean asyncio client on uvloop.",
        "",
        f"Command: `{meta.get('command', 'python -m labs run load')}` ({meta.get('wall_s', 0):.0f} s).",
        "",
        *([f"**Provenance:** {one_line(meta['provenance'])}", ""] if meta.get("provenance") else []),
        "## First limit hit",
        "",
        "| path | config | at streams | first limit | evidence |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        at, name, evidence = limit_text(r)
        lines.append(f"| {r.path.name} | {r.path.limit} | {at} | {name} | {_cell(evidence)} |")
    lines += ["", "## Every step", "",
              "| path | " + " | ".join(STEP_COLUMNS) + " |",
              "| --- |" + " ---: |" * len(STEP_COLUMNS)]
    for r in results:
        for step in r.steps:
            mark = "" if step.healthy else " **!**"
            lines.append(f"| {r.path.name}{mark} | " + " | ".join(step_row(step)) + " |")
    lines += ["", "## Evidence per unhealthy step", ""]
    for r in results:
        for step in r.steps:
            if step.healthy:
                continue
            lines.append(f"- **{r.path.name} @ {step.concurrency}**: "
                         + "; ".join(f"{x.name}" for x in step.limits))
            for label, data in (("client errors", step.errors), ("proxy log", step.proxy_log),
                                ("proxy access", step.proxy_access),
                                ("proxy counters", step.proxy_counters),
                                ("server statuses", step.server_statuses),
                                ("server log", step.server_log),
                                ("TCP counters (machine)", step.tcp_counters),
                                ("TTFT histogram", step.ttft_histogram)):
                if data:
                    shown = "; ".join(f"`{k}` x{v}" for k, v in list(data.items())[:5])
                    lines.append(f"  - {label}: {shown}")
    lines += ["", "![load](load.png)", ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def plot(results: Sequence[PathResult], path: Path) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    panels = (("completed streams, % of opened", lambda s: 100.0 * s.completed / s.concurrency),
              ("delivered tok/s, % of ideal", lambda s: s.rate_pct),
              ("TTFT p99 (s)", lambda s: s.ttft_p99_s or float("nan")))
    teaching = [r.path.name for r in results if r.path.role == "teaching"]
    for ax, (title, value) in zip(axes, panels):
        for r in results:
            if not r.steps:
                continue
            xs = [s.concurrency for s in r.steps]
            ys = [value(s) for s in r.steps]
            style = {"broken": "--", "teaching": ":"}.get(r.path.role, "-")
            colour = (TEACHING_COLOURS[teaching.index(r.path.name) % len(TEACHING_COLOURS)]
                      if r.path.role == "teaching" else COLOURS.get(r.path.proxy, "#777777"))
            ax.plot(xs, ys, style, marker="o", color=colour, label=r.path.name, alpha=0.9)
        ax.set_xscale("log")
        ax.set_xlabel("concurrent streams")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].axhline(MIN_RATE_PCT, color="#c0392b", lw=0.8)
    axes[2].set_yscale("log")
    axes[2].axhline(MAX_TTFT_P99_S, color="#c0392b", lw=0.8)
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle("Load lab: where each path falls off (dashed: broken limit, solid: fixed config, "
                 "dotted: teaching rows)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(results: Sequence[PathResult], out: Path, meta: Mapping[str, Any]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "png": out / "load.png"}
    paths["json"].write_text(json.dumps(report_dict(results, meta), indent=2, default=str) + "\n")
    paths["md"].write_text(markdown(results, meta))
    plot(results, paths["png"])
    return paths
