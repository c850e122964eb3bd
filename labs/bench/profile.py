"""`python -m labs.bench.profile`: where the server's CPU goes in a burst of simultaneous arrivals
(or under many paced streams), sampled with py-spy from outside the server process.

    python -m labs.bench.profile [--arrivals 1000] [--rounds 3] [--streams 0] [--out reports/bench]

It starts `python -m server --engine synthetic`, sends `--rounds` bursts of `--arrivals` streams
of 3 tokens at once (or, with `--streams N`, N streams of 80 tokens at 20 tok/s), and records the
server with `py-spy record --gil` (only samples that hold the GIL: Python's own CPU, so a thread
waiting for the GIL is not counted as busy). It writes:

* `profile-<case>.txt`: the collapsed stacks (flamegraph.pl, speedscope and inferno read them);
* `profile-<case>.md`: the phases of the path (accept, HTTP parse, the framework's layers, body
  read, validation, template and tokenization, engine submit, the stream's headers, tokens and
  end, the decode loop, the event loop's own C code) and the top functions by own time, as
  shares of the samples and as us per request (per token with `--streams`): the share times the
  server's CPU (user + system) read from /proc. The shares, not py-spy's sample times, carry
  the figures: on a loaded machine a thread that holds the GIL while the OS runs something else
  is still sampled as holding it.

py-spy is not a dependency of the lab: `pip install py-spy` (or `pip install -e .[profile]`).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from labs.client.durations import milliseconds
from labs.bench.modules import REPO_ROOT

# (phase, function names): a sample belongs to the innermost frame of its stack that is named
# here; samples with none of them are the event loop's own C code (uvloop) or other.
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("decode loop (engine thread)", ("Scheduler._run_thread",)),
    ("stream: token frames and writes", ("SSECompletion.content", "Completion._pump",
                                         "Completion._take")),
    ("stream: finish, [DONE], end", ("SSECompletion.complete", "SSECompletion.end")),
    ("stream: headers and role frame", ("SSECompletion.begin",)),
    ("stream: set-up (its timers, the departure callback)",
     ("Completion.__call__", "SSECompletion.__call__", "SSECompletion.__init__")),
    ("body read", ("Service.read_body", "CompletionLane._body")),
    ("JSON parse + validation (pydantic)", ("Service.parse",)),
    ("template + tokenization", ("Service._tokenize",)),
    ("engine submit", ("Scheduler.submit", "Scheduler._wake_decode_loop")),
    ("admission (model, budget, lab knobs)", ("Service.admit", "Service.accept")),
    ("route (the rest of the handler)", ("create_app.<locals>.chat_completions",
                                         "create_app.<locals>.answer")),
    ("framework layers (Starlette/FastAPI middleware, routing)",
     ("RequestResponseCycle.run_asgi",)),
    ("the completion lane (one header scan, the checks)", ("CompletionLane.serve",)),
    ("token hand-over to the event loop", ("deliver_all",)),
    ("HTTP: connection accepted", ("LimitedHttpTools.connection_made", "connection_made")),
    ("HTTP: request parse (httptools)", ("LimitedHttpTools.data_received", "data_received")),
    ("HTTP: connection closed", ("LimitedHttpTools.connection_lost", "connection_lost")),
    ("event loop's own C code (uvloop: epoll, accept, task steps)", ("Runner.run",)),
)
# py-spy sees a resumed coroutine without the frames that started it (no Runner.run, no
# route): such stacks are placed by the frames they do show.
PARTIAL: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("stream: token frames and writes", ("SSECompletion._emit", "ScheduledGeneration._next",
                                         "ScheduledGeneration._iterate")),
    ("uvicorn's send (stack without its caller)", ("RequestResponseCycle.send",)),
)
OTHER = "other"


def function_name(frame: str) -> str:
    """`Class.method (path/file.py:12)` -> `Class.method`."""
    return frame.split(" (", 1)[0]


def phase_of(frames: Sequence[str]) -> str:
    names = [function_name(f) for f in frames]
    for table in (PHASES, PARTIAL):
        for name in reversed(names):  # innermost first
            for phase, anchors in table:
                if name in anchors:
                    return phase
    return OTHER


def read_collapsed(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """py-spy's raw output: `frame;frame;... count` per line."""
    stacks = []
    for line in lines:
        line = line.rstrip()
        if not line or " " not in line:
            continue
        stack, count = line.rsplit(" ", 1)
        if count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def summarize(stacks: list[tuple[list[str], int]], cpu_us_per_unit: float) -> dict[str, Any]:
    """Phases and top functions: shares of the samples, and us of CPU per unit (request or
    token) as the share of the server's measured CPU per unit."""
    phases: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for frames, count in stacks:
        total += count
        phases[phase_of(frames)] += count
        leaf = frames[-1]
        where = leaf.split(" (", 1)[1].split(":")[0].rsplit("/", 1)[-1] if " (" in leaf else ""
        own[f"{function_name(leaf)} ({where})"] += count
    per_sample_us = cpu_us_per_unit / max(1, total)
    return {"samples": total,
            "phases": [(name, n * per_sample_us, 100 * n / max(1, total))
                       for name, n in phases.most_common()],
            "top": [(name, n * per_sample_us, 100 * n / max(1, total)) for name, n in own.most_common(25)]}


def collector_passes(samples: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Passes of the cyclic garbage collector and their seconds so far, by generation
    (streamlab_gc_pause_seconds): py-spy shows no frame for them."""
    return {generation: (samples.get(f'streamlab_gc_pause_seconds_count{{generation="{generation}"}}', 0.0),
                         samples.get(f'streamlab_gc_pause_seconds_sum{{generation="{generation}"}}', 0.0))
            for generation in "012"}


def _cpu_s(pid: int) -> tuple[float, float]:
    ticks = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def find_py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy (or pip install -e .[profile])")
    return found


def run(arrivals: int, rounds: int, streams: int, out: Path, rate_hz: int) -> dict[str, Any]:
    from labs.load import SYNTHETIC
    from labs.load.paths import script
    from labs.load.lab import PROMPT
    from labs.client.driver import no_gc_pauses, streams_at_once, uvloop_runner
    from labs.client.results import percentile
    from labs.client.resources import raise_own_fd_limit
    from labs.lab.server import served_model
    from server.launcher import running_server

    py_spy = find_py_spy()
    raise_own_fd_limit()
    case = f"streams-{streams}" if streams else f"burst-{arrivals}"
    tokens = 80 if streams else 3
    out.mkdir(parents=True, exist_ok=True)
    collapsed = out / f"profile-{case}.txt"
    rows = []
    with running_server(SYNTHETIC.args()) as server, uvloop_runner() as runner:
        url = server.url + "/v1/chat/completions"
        body = {"model": served_model(server.url), "messages": PROMPT, "stream": True,
                "max_tokens": tokens, "lab": {"tokens_per_s": 20.0, "stamp": True,
                                              "script": script(tokens)}}
        runner.run(streams_at_once(url, {**body, "max_tokens": 3}, 50, 30.0))  # warm-up
        spy = subprocess.Popen([py_spy, "record", "--pid", str(server.process.pid), "--rate",
                                str(rate_hz), "--gil", "--nonblocking", "--format", "raw",
                                "--output", str(collapsed)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # py-spy attaches
        collector0 = collector_passes(server.metrics())
        user0, system0 = _cpu_s(server.process.pid)
        try:
            for _ in range(rounds if not streams else 1):
                with no_gc_pauses():
                    batch = runner.run(streams_at_once(url, body, streams or arrivals, 60.0))
                ttfts = [r.ttft_s for r in batch.results if r.ttft_s is not None]
                rows.append({"ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
                             "client_cpu_s": batch.client_cpu_s,
                             "failed": sum(r.outcome != "complete" for r in batch.results)})
                time.sleep(0.3)
        finally:
            user1, system1 = _cpu_s(server.process.pid)
            collector1 = collector_passes(server.metrics())
            spy.send_signal(signal.SIGINT)
            try:
                _, err = spy.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                err = "py-spy did not stop"
    if not collapsed.exists():
        raise SystemExit(f"py-spy wrote nothing: {err.strip()[-500:]}")
    units = (streams * tokens) if streams else (arrivals * rounds)
    cpu_us = (user1 - user0 + system1 - system0) / units * 1e6
    result = summarize(read_collapsed(collapsed.read_text().splitlines()), cpu_us)
    result.update({"case": case, "unit": "token" if streams else "request", "rounds": rows,
                   "server_user_us_per_unit": (user1 - user0) / units * 1e6,
                   "server_system_us_per_unit": (system1 - system0) / units * 1e6,
                   "load_average": os.getloadavg(), "collapsed": str(collapsed),
                   "collector": {generation: (collector1[generation][0] - passes_s[0],
                                              (collector1[generation][1] - passes_s[1]) / units * 1e6)
                                 for generation, passes_s in collector0.items()}})
    (out / f"profile-{case}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"profile-{case}.md").write_text(markdown(result) + "\n")
    return result


def markdown(result: dict[str, Any]) -> str:
    unit = result["unit"]
    lines = [f"# Server profile: {result['case']} (py-spy --gil, synthetic engine)", "",
             f"Server CPU from /proc: {result['server_user_us_per_unit']:.0f} us user + "
             f"{result['server_system_us_per_unit']:.0f} us system per {unit} ({result['samples']} "
             f"py-spy samples holding the GIL; us below = share x that CPU). Load average "
             f"{' / '.join(f'{v:.2f}' for v in result['load_average'])} (2-core machine).", ""]
    collector = result.get("collector") or {}
    if collector:
        total = sum(us for _, us in collector.values())
        each = ", ".join(f"gen{g} {us:.1f} us ({passes:.0f} passes)" for g, (passes, us) in collector.items())
        lines += [f"The cyclic garbage collector (streamlab_gc_pause_seconds): {total:.1f} us per "
                  f"{unit}: {each}. py-spy shows no frame for it: its samples are in the phases "
                  "below, on whatever frame allocated when a pass began.", ""]
    for row in result["rounds"]:
        lines.append(f"- TTFT p50 {milliseconds(row['ttft_p50_s'])}, p99 {milliseconds(row['ttft_p99_s'])}, "
                     f"client CPU {milliseconds(row['client_cpu_s'])}, failed {row['failed']}")
    lines += ["", f"| phase | us per {unit} | share |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {us:.1f} | {pct:.0f}% |" for name, us, pct in result["phases"]]
    lines += ["", f"| function (own time) | us per {unit} | share |", "| --- | ---: | ---: |"]
    lines += [f"| `{name}` | {us:.1f} | {pct:.1f}% |" for name, us, pct in result["top"]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.bench.profile",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--arrivals", type=int, default=1000, help="streams of each burst")
    parser.add_argument("--rounds", type=int, default=3, help="bursts")
    parser.add_argument("--streams", type=int, default=0,
                        help="instead of bursts: this many streams x 80 tokens at 20 tok/s")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "bench")
    args = parser.parse_args(argv)
    result = run(args.arrivals, args.rounds, args.streams, args.out, args.rate)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
