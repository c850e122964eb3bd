"""`python -m labs bench`: the command line, the parts in order, the files it writes."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from labs.bench import accounting, apis
from labs.bench.admission import ARRIVALS, BURST_TOKENS_S, ROUNDS, WORKERS, bench_admission
from labs.bench.locust_agreement import bench_locust_agreement
from labs.bench.locust_agreement import markdown_lines as locust_lines
from labs.bench.markdown import markdown
from labs.bench.prefill import COUNTS, bench_prefill
from labs.bench.measuring_client import CLIENT_STREAMS, bench_client
from labs.bench.modules import REPO_ROOT, run_module
from labs.bench.proxies import PACED_RATE, PACED_TOKENS, PROXIES, Progress, bench_proxies
from labs.bench.references import REFERENCES
from labs.bench.server_cpu import CPU_CASES, bench_server_cpu
from labs.bench.tools import bench_tools
from labs.bench.tools import markdown_lines as tools_lines
from labs.bench.verdicts import FAILED, summary
from labs.client.resources import raise_own_fd_limit

DEFAULT_OUT = REPO_ROOT / "reports" / "bench"
PARTS = ("admission", "prefill", "proxies", "server-cpu", "apis", "accounting", "server", "engine", "client",
         "locust", "tools")
SERVER_CPU_DURATION_S = 4.0
# Seconds to start a server, or a proxy, and to open and close a step's streams (per 1,000):
# what this 2-core machine takes, for the progress bar's estimate only.
START_S, STEP_S, PER_1000_STREAMS_S = 1.0, 0.5, 4.0


@dataclass(frozen=True)
class Part:
    name: str
    run: Callable[[Progress], dict[str, Any]]
    expected_s: float  # for the progress bar


def parts(args: argparse.Namespace) -> dict[str, Part]:
    paths = 1 + len(PROXIES)

    def step_s(streams: int, duration_s: float) -> float:
        return duration_s + STEP_S + PER_1000_STREAMS_S * streams / 1000

    return {part.name: part for part in (
        # The reference servers take a burst per round beside the first server's paths.
        Part("admission", lambda progress: bench_admission(progress, args.arrivals),
             len(WORKERS) * (START_S * paths + ROUNDS * paths * step_s(args.arrivals, 0.15))
             + len(REFERENCES) * (START_S + ROUNDS * step_s(args.arrivals, 0.15))),
        # ~2 s per tiny-model server start, a burst of 64 ~1 s with serial prefill.
        Part("prefill", lambda progress: bench_prefill(progress), 2 * (3.0 + 3 * len(COUNTS) * 0.6)),
        Part("proxies", lambda progress: bench_proxies(args.streams, args.duration, args.rounds, progress),
             START_S * paths + paths * (PACED_TOKENS / PACED_RATE + 0.01 * (args.rounds + 1))
             + paths * step_s(args.streams, args.duration)),
        Part("server-cpu", lambda progress: bench_server_cpu(SERVER_CPU_DURATION_S, progress),
             2 * START_S + sum(2 * step_s(streams, SERVER_CPU_DURATION_S) for streams, _ in CPU_CASES)
             + (1 + len(REFERENCES)) * step_s(1000, SERVER_CPU_DURATION_S)),
        # Per protocol: its many streams, two single streams, its bursts; then the raw ASGI floor.
        Part("apis", lambda progress: apis.bench_apis(progress),
             START_S + (len(apis.APIS) + 1) * (step_s(apis.STREAMS, apis.DURATION_S)
                                                + apis.ROUNDS * step_s(apis.ARRIVALS, BURST_TOKENS_S))),
        # Four Envoys, one after another, each a few seconds of streams.
        Part("accounting", lambda progress: accounting.bench_accounting(progress),
             len(accounting.PATHS) * (START_S + accounting.EVENTS / accounting.RATE + STEP_S)),
        # Measured here: server.tools.bench ~12 s, server.tools.engine_bench ~5 s (one model load).
        Part("server", lambda progress: run_module("server.tools.bench", args.out / "server.json"), 12.0),
        Part("engine", lambda progress: run_module("server.tools.engine_bench", args.out / "engine.json"), 5.0),
        Part("client", lambda progress: bench_client(progress), 2 * (2.0 + 3.0 + PER_1000_STREAMS_S
                                                                     * CLIENT_STREAMS / 1000)),
        # Both clients at 300 (lab twice), then up to 2,000 streams (measured here: 120-180 s).
        Part("locust", lambda progress: bench_locust_agreement(progress), 9 * 20.0),
        # Measured here: verify --quick ~6 s, verify ~33 s, probe ~65 s.
        Part("tools", lambda progress: bench_tools(progress), 105.0),
    )}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs bench",
                                     description="every benchmark of the project in one run",
                                     epilog="exit status: 0 every target met, 1 a target missed, 2 a part "
                                            "failed or a target could not be judged")
    parser.add_argument("--only", default="", help=f"comma-separated parts (default all): {', '.join(PARTS)}")
    parser.add_argument("--streams", type=int, default=1000, help="streams of the many-streams step")
    parser.add_argument("--arrivals", type=int, default=ARRIVALS,
                        help="simultaneous arrivals of the admission part")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per many-streams stream")
    parser.add_argument("--rounds", type=int, default=30, help="one-stream TTFT rounds per path")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(list(argv) if argv is not None else None)
    chosen = [p.strip() for p in args.only.split(",") if p.strip()] or list(PARTS)
    unknown = set(chosen) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")

    command = "python -m labs bench" + (" " + " ".join(argv) if argv else "")
    try:
        return _run(args, chosen, command)
    except Exception as exc:  # noqa: BLE001 - the bench's own failure: one line, never a verdict
        print(f"error: the bench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return FAILED


def _run(args: argparse.Namespace, chosen: list[str], command: str) -> int:
    """Run the chosen parts, write bench.md, print the verdict; the exit status."""
    from rich.console import Console

    from labs.bench.progress import BenchProgress

    raise_own_fd_limit()
    args.out.mkdir(parents=True, exist_ok=True)
    console = Console()
    results: dict[str, Any] = {}
    started = time.monotonic()
    plan = parts(args)
    with BenchProgress(console, {name: plan[name].expected_s for name in chosen}) as bar:
        for name in chosen:
            with bar.part(name):
                try:
                    results[name] = plan[name].run(bar.step)
                except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others
                    results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            if "result" not in results[name]:  # server.tools.bench and engine_bench wrote their own
                (args.out / f"{name}.json").write_text(json.dumps(results[name], indent=2, default=str) + "\n")
    for name in PARTS:  # the parts not run this time: their last results, if any
        saved = args.out / f"{name}.json"
        if name not in results and saved.exists():
            data = json.loads(saved.read_text())
            results[name] = {"result": data} if name in ("server", "engine") else data
    text = markdown(results, command) + "\n".join(locust_lines(results.get("locust") or {}))
    if (results.get("tools") or {}).get("rows"):
        text += "\n" + "\n".join(tools_lines(results["tools"]))
    text += f"\nWall time: {time.monotonic() - started:.0f} s.\n"
    (args.out / "bench.md").write_text(text)
    console.print(text)
    # The verdict is over the parts run this time, never the saved results of earlier runs.
    status, lines = summary({name: results[name] for name in chosen})
    console.print("\n".join(lines), markup=False, highlight=False)
    return status
