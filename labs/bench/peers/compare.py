"""`make bench-peers` (`python -m labs.bench.peers`): the lab's measuring client beside NVIDIA
AIPerf 0.13.0 and guidellm 0.8.1, against one server with one pacing.

    python -m labs.bench.peers                         # install what is missing, run, report
    python -m labs.bench.peers --streams 1 --requests 10 --only lab,guidellm

Not a part of `make bench` or `make test`: the peers need ~2.6 GB of installs. Steps:
1. installs each peer in its own venv under .venvs/ (labs/bench/peers/install.py; pinned; the
   CPU torch for guidellm); a failed install is reported and the other tools still run;
2. starts one server (`--engine synthetic`) and, for each stream count (default 1 and 50), runs
   the three tools one after another with the same `lab` pacing object in every request body
   (200 ms to the first token, 20 tokens at 20 tok/s): the lab client in its own process
   (labs/bench/peers/lab.py), AIPerf with `--extra-inputs`, guidellm with its backend's
   `extras.body`; each tool's CPU is its whole process tree's (labs/bench/tree_cpu.py), and the
   server's /metrics are read before and after each run (its own TTFT and tokens generated);
3. parses each tool's own output files (AIPerf's profile_export_aiperf.json, guidellm's
   benchmarks.json) and writes reports/bench-peers/peers.json and peers.md, the table printed
   with rich (labs/bench/peers/table.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from labs.bench.peers import aiperf as peer_aiperf
from labs.bench.peers import guidellm as peer_guidellm
from labs.bench.peers import lab as peer_lab
from labs.bench.peers.install import BY_NAME, REPO_ROOT, install_all, problem
from labs.bench.peers.figures import Figures
from labs.bench.peers.table import TOOLS, ToolRun, markdown, print_rich
from labs.bench.tree_cpu import run_tree

STREAMS = (1, 50)
REQUESTS = (20, 200)  # per tool: 20 one after another; 4 rounds of 50
FIRST_TOKEN_DELAY_S, TOKENS, TOKENS_PER_S = 0.2, 20, 20.0
PROMPT_TOKENS = 16  # the peers' synthetic prompts (the synthetic engine ignores the prompt)
SERVER_ARGS = ("--engine", "synthetic", "--slots", "256", "--max-queue", "0", "--log-level", "warning")
RUN_TIMEOUT_S = 300.0
MODEL_DIR = REPO_ROOT / ".models" / "tiny"
DEFAULT_OUT = REPO_ROOT / "reports" / "bench-peers"


def lab_object() -> dict[str, Any]:
    """The pacing every tool sends: a script, so each token is one event and one usage token."""
    from labs.load import script
    return {"first_token_delay_s": FIRST_TOKEN_DELAY_S, "tokens_per_s": TOKENS_PER_S, "script": script(TOKENS)}


def lab_body(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "Tell me something."}],
            "stream": True, "stream_options": {"include_usage": True}, "max_tokens": TOKENS,
            "lab": lab_object()}


SERVER_KEYS = {"ttft_sum": "streamlab_time_to_first_token_seconds_sum",
               "ttft_count": "streamlab_time_to_first_token_seconds_count",
               "tokens": "streamlab_tokens_generated_total",
               "requests": 'streamlab_requests_total{status="200"}'}


def server_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, Any]:
    """What the server itself saw over one tool's run: requests, tokens, its own TTFT mean."""
    d = {name: after.get(key, 0.0) - before.get(key, 0.0) for name, key in SERVER_KEYS.items()}
    return {"requests": d["requests"], "tokens": d["tokens"], "ttft_count": d["ttft_count"],
            "ttft_mean_s": d["ttft_sum"] / d["ttft_count"] if d["ttft_count"] else None}


def _env(out_dir: Path) -> dict[str, str]:
    """Offline, loopback only, caches kept inside the report folder."""
    hf = out_dir.parent / ".hf"
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "HF_HOME": str(hf), "HF_HUB_CACHE": str(hf / "hub"), "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"}


def _plan(tool: str, url: str, model: str, streams: int, requests: int,
          out_dir: Path) -> tuple[list[str], Callable[[Path], Figures]]:
    """The command of `tool` and the parser of what it writes into `out_dir`."""
    lab = lab_object()
    if tool == "lab":
        return ([sys.executable, "-m", "labs.bench.peers.lab", url, "--body", json.dumps(lab_body(model)),
                 "--streams", str(streams), "--requests", str(requests), "--out", str(out_dir / "lab.json")],
                lambda d: peer_lab.parse(d / "lab.json"))
    if tool == "aiperf":
        peer_aiperf.hub_cache(MODEL_DIR, out_dir.parent / ".hf" / "hub")
        return (peer_aiperf.command(BY_NAME["aiperf"].executable, url, model, streams, requests, lab,
                                    TOKENS, PROMPT_TOKENS, out_dir), peer_aiperf.parse)
    return (peer_guidellm.command(BY_NAME["guidellm"].executable, url, model, streams, requests, lab,
                                  TOKENS, PROMPT_TOKENS, MODEL_DIR, out_dir), peer_guidellm.parse)


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_tool(tool: str, streams: int, requests: int, server: Any, model: str, out: Path,
             missing: Mapping[str, str]) -> ToolRun:
    """One tool at one stream count against the running server; never raises for the tool's
    own failure (it becomes the run's `missing` reason, with the end of its log)."""
    if tool in missing:
        return ToolRun(tool, streams, missing=missing[tool])
    out_dir = out / f"{tool}-{streams}"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    argv, parse = _plan(tool, server.url, model, streams, requests, out_dir)
    run = ToolRun(tool, streams, command=" ".join(argv))
    before = server.metrics()
    tree = run_tree(argv, env=_env(out_dir), cwd=REPO_ROOT, log=out_dir / "output.log", timeout_s=RUN_TIMEOUT_S)
    run.server = server_delta(before, server.metrics())
    run.cpu_s, run.wall_s, run.processes = tree.cpu_s, tree.wall_s, tree.processes
    if tree.timed_out or tree.returncode != 0:
        why = f"ran past {RUN_TIMEOUT_S:.0f} s" if tree.timed_out else f"exited {tree.returncode}"
        run.missing = f"{why}; the end of {out_dir / 'output.log'}:\n{_tail(out_dir / 'output.log')}"
        return run
    try:
        run.figures = parse(out_dir)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        run.missing = f"its output could not be read: {type(exc).__name__}: {exc}"
    return run


def measure(streams: Sequence[int], requests: Sequence[int], tools: Sequence[str], out: Path,
            missing: Mapping[str, str], progress: Callable[[str], None]) -> list[ToolRun]:
    from labs.lab.server import served_model
    from server.launcher import running_server

    runs = []
    with running_server(list(SERVER_ARGS)) as server:
        model = served_model(server.url)
        for n, count in zip(streams, requests):
            for tool in tools:
                progress(f"{tool}: {n} stream{'s' if n > 1 else ''}, {count} requests")
                runs.append(run_tool(tool, n, count, server, model, out, missing))
    return runs


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected numbers >= 1, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.bench.peers", description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=_ints, default=list(STREAMS), help="stream counts (default 1,50)")
    parser.add_argument("--requests", type=_ints, default=list(REQUESTS),
                        help="requests per tool at each stream count (default 20,200)")
    parser.add_argument("--only", default=",".join(TOOLS), help=f"tools to run (default {','.join(TOOLS)})")
    parser.add_argument("--no-install", action="store_true", help="use the venvs as they are; install nothing")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(list(argv) if argv is not None else None)
    tools = [t.strip() for t in args.only.split(",") if t.strip()]
    if set(tools) - set(TOOLS):
        parser.error(f"unknown tools: {', '.join(sorted(set(tools) - set(TOOLS)))}")
    if len(args.requests) != len(args.streams):
        parser.error(f"--requests needs one count per stream count ({len(args.streams)})")
    if not (MODEL_DIR / "tokenizer.json").is_file():
        parser.error(f"{MODEL_DIR} has no tokenizer: run `make setup` first")

    started = time.monotonic()
    peers = [t for t in tools if t != "lab"]
    missing = {} if args.no_install else install_all(peers)
    missing.update({t: p for t in peers if t not in missing and (p := problem(BY_NAME[t]))})
    args.out.mkdir(parents=True, exist_ok=True)
    runs = measure(args.streams, args.requests, tools, args.out, missing,
                   lambda line: print(f"bench-peers: {line}", file=sys.stderr, flush=True))
    lab = lab_object()
    result = {
        "command": "python -m labs.bench.peers" + (" " + " ".join(argv) if argv else ""),
        "setup": {"engine": "synthetic", "server_args": " ".join(SERVER_ARGS), "lab": json.dumps(lab),
                  "lab_shown": json.dumps({**lab, "script": f"<{len(lab['script'].split())} words>"}),
                  "first_token_delay_s": FIRST_TOKEN_DELAY_S, "tokens": TOKENS, "tokens_per_s": TOKENS_PER_S,
                  "ideal_ttft_s": FIRST_TOKEN_DELAY_S,
                  "ideal_e2e_s": FIRST_TOKEN_DELAY_S + (TOKENS - 1) / TOKENS_PER_S,
                  "streams": args.streams, "requests": {str(s): r for s, r in zip(args.streams, args.requests)},
                  "prompt_tokens": PROMPT_TOKENS, "versions": {p.name: p.version for p in BY_NAME.values()}},
        "runs": [run.to_dict() for run in runs],
        "wall_s": time.monotonic() - started,
    }
    (args.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "peers.md").write_text(markdown(result, runs))
    print_rich(result, runs)
    print(f"wrote {args.out / 'peers.json'} and {args.out / 'peers.md'}")
    return 0 if all(run.figures for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
