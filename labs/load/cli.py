"""The load lab: ramp concurrent streams through each path and name the first limit it hits.

    python -m labs run load                  # every path, the default ramp (a few minutes)
    python -m labs.load --paths direct,nginx-broken --steps 100,300 --duration 5
    python -m labs.load --reanalyse reports/load/report.json   # the current rules, no run
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Sequence

from labs import provenance
from labs.load.analysis import PathResult, diagnose
from labs.load.paths import PATHS, LoadPath, get_path
from labs.load.results import StepResult
from labs.load.lab import LoadLab
from labs.progress import WorkBar
from server.locations import reports_dir

# Per step, beyond its streams' length: ramping up, draining, sampling, the server's restart.
STEP_OVERHEAD_S = 3.0



def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.load", description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="", help="comma-separated path names (default: all): "
                        + ", ".join(p.name for p in PATHS))
    parser.add_argument("--steps", default="", help="comma-separated stream counts, for every path "
                        "(default: each path's own ramp)")
    parser.add_argument("--duration", type=float, default=8.0,
                        help="seconds each stream lasts (default 8: the lab fits in a few minutes)")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens/s per stream (default 20)")
    parser.add_argument("--runtime", choices=("local", "docker"), default=None)
    parser.add_argument("--out", type=Path, default=reports_dir() / "load")
    parser.add_argument("--reanalyse", type=Path, metavar="REPORT_JSON",
                        help="run nothing: diagnose the steps of an earlier report.json again "
                             "and rewrite the report (after a change to the rules)")
    args = parser.parse_args(argv)
    if args.reanalyse:
        return reanalyse(args.reanalyse, args.out)

    from rich.console import Console

    from labs.load import report
    from labs.lab.hops import runtime_named

    paths = [get_path(n.strip()) for n in args.paths.split(",") if n.strip()] or list(PATHS)
    steps = [int(s) for s in args.steps.split(",") if s.strip()] or None
    console = Console()
    started, started_at = time.monotonic(), provenance.started_now()
    plan = {path.name: [step_s(path, args.duration) for _ in steps or path.steps] for path in paths}

    # The bar redraws only on these calls, never from a timer thread (see labs.progress).
    with WorkBar(console, sum(map(sum, plan.values())), "lab-load") as bar, \
            LoadLab(duration_s=args.duration, tokens_per_s=args.rate, progress=bar.say,
                    runtime=runtime_named(args.runtime),
                    on_step=lambda path, step: bar.advance(plan[path.name].pop())) as lab:
        results = []
        for path in paths:
            results.append(lab.run_path(path, steps))
            bar.advance(sum(plan[path.name]))  # the steps a path skipped (a limit hit, an error)
            plan[path.name].clear()
            report.print_path(results[-1], bar.console)
        bar.finish(f"{len(paths)} paths")
    given = [a for a in (sys.argv[1:] if argv is None else argv)]
    if given[:1] == ["--out"] and len(given) <= 4:  # what `python -m labs run load` passes
        command = "make lab-load (python -m labs run load)"
    else:
        command = "python -m labs.load " + " ".join(given)
    meta = {"duration_s": args.duration, "tokens_per_s": args.rate,
            "wall_s": time.monotonic() - started, "command": command,
            "provenance": provenance.collect(
                lab.runtime.name, [p.proxy for p in paths if p.proxy],
                {p.name: server_command(p) for p in paths}, started_at, server_in_runtime=False)}
    written = report.write_report(results, args.out, meta)
    report.print_summary(results, console)
    console.print(f"report: {written['md']}  picture: {written['png']}  ({meta['wall_s']:.0f} s)")
    return 1 if any(r.error for r in results) else 0


def step_s(path: LoadPath, duration_s: float) -> float:
    """How long one step of `path` should take, for the progress bar's plan."""
    return (path.duration_s or duration_s) + STEP_OVERHEAD_S


def server_command(path: LoadPath) -> str:
    command = shlex.join(("python", "-m", "server", *path.server.args()))
    limit = path.server.fd_soft_limit
    return command if limit is None else f"ulimit -Sn {limit}; {command}"


def reanalyse(report_json: Path, out: Path) -> int:
    """Rebuild the results of an earlier run from its report.json, diagnose every step again
    with the current rules, and write the report anew."""
    from rich.console import Console

    from labs.load import report

    data = json.loads(report_json.read_text())
    results = []
    for entry in data["paths"]:
        result = PathResult(get_path(entry["path"]["name"]), error=entry.get("error"))
        for d in entry["steps"]:
            step = StepResult.from_dict(d)
            step.limits = diagnose(step)
            result.steps.append(step)
        results.append(result)
    written = report.write_report(results, out, data.get("meta", {}))
    report.print_summary(results, Console())
    print(f"report: {written['md']}")
    return 0
