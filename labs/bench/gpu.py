"""`make bench-gpu` (`python -m labs.bench.gpu`): the transformers engine on a CUDA GPU.

    python -m labs.bench.gpu                              # --device cuda --size gpu
    python -m labs.bench.gpu --device cpu --size tiny     # the same steps on CPU (no GPU here)

No CI depends on it. Steps, each written to OUT/gpu.json and OUT/gpu.md:
1. builds the model of `--size` when `.models/<size>` is missing (server.tools.model_builder);
2. tokens/s at batch 1, 8, 32 and 64 through the real engine (`python -m server.tools.engine_bench
   --slots N`: batch 1 and batch N);
3. starts the server (`--device`, 64 slots) and measures TTFT at 1 and at 64 simultaneous
   arrivals (a ~200-token chat prompt, 4 teacher-forced tokens, unpaced: batched prefill);
4. the streaming path on that device: one scripted stream's SSE framing (one event per token,
   the exact text, [DONE]) and a disconnect after 5 events (the slot freed within one decode
   step: streamlab_slot_held_after_disconnect_seconds against two median steps + 5 ms).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from labs import client
from labs.bench.modules import REPO_ROOT, run_module
from labs.bench.prefill import PROMPT_TEXT
from labs.load import script
from labs.client.results import percentile

BATCHES = (8, 32, 64)
ARRIVALS = (1, 64)


def _body(model: str, tokens: int, rate: float | None = None, whole_script: bool = False) -> bytes:
    """`tokens` tokens of the lab's script; `whole_script`: no max_tokens, the whole script."""
    lab: dict[str, Any] = {"script": script(tokens)}
    if rate:
        lab["tokens_per_s"] = rate
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT_TEXT}],
            "stream": True, "lab": lab}
    return json.dumps(body if whole_script else {**body, "max_tokens": tokens}).encode()


def engine_runs(size: str, device: str, out: Path) -> list[dict[str, Any]]:
    runs: dict[int, dict[str, Any]] = {}
    for slots in BATCHES:
        got = run_module("server.tools.engine_bench", out / f"engine-{slots}.json",
                         ["--size", size, "--device", device, "--slots", str(slots)], timeout_s=900)
        if "result" not in got:
            raise RuntimeError(f"server.tools.engine_bench --slots {slots}: {got}")
        for run in got["result"]["runs"]:
            runs.setdefault(run["batch"], run)
    return [runs[b] for b in sorted(runs)]


async def server_checks(url: str, model: str, step_ms: float) -> dict[str, Any]:
    chat = url + "/v1/chat/completions"
    await client.measure_stream(chat, _body(model, 4))  # warm-up
    ttft: dict[str, Any] = {}
    for n in ARRIVALS:
        batch = await client.run_many(chat, [_body(model, 4)] * n, n, 120.0)
        values = [r.ttft_s for r in batch.results if r.ttft_s is not None]
        ttft[str(n)] = {"p50_s": percentile(values, 50), "p99_s": percentile(values, 99),
                        "failed": sum(r.outcome != "complete" for r in batch.results)}
    text = script(40)
    framed = await client.measure_stream(chat, _body(model, 40, 50.0, whole_script=True))
    framing = {"outcome": framed.outcome, "content_events": framed.content_events,
               "script_match": framed.script_match(text), "saw_done": framed.saw_done,
               "replacement_chars": framed.replacement_chars}
    left = await client.measure_stream(chat, _body(model, 200, 50.0), disconnect_after_events=5)
    return {"ttft": ttft, "framing": framing, "disconnect_outcome": left.outcome,
            "step_ms_median": step_ms}


def run(device: str, size: str, out: Path) -> dict[str, Any]:
    from labs.lab.server import served_model
    from server.launcher import running_server

    out.mkdir(parents=True, exist_ok=True)
    model_dir = REPO_ROOT / ".models" / size
    if not (model_dir / "config.json").is_file():
        print(f"building the {size} model in {model_dir}", file=sys.stderr)
        from server.tools.model_builder import build
        build(model_dir, size=size)
    result: dict[str, Any] = {"device": device, "size": size, "engine": engine_runs(size, device, out)}
    step_ms = result["engine"][0]["step_ms_median"]
    args = ["--engine", "transformers", "--model", str(model_dir), "--device", device,
            "--slots", "64", "--max-queue", "64", "--log-level", "warning"]
    with running_server(args) as server:
        result.update(asyncio.run(server_checks(server.url, served_model(server.url), step_ms)))
        deadline = time.monotonic() + 5
        samples = server.metrics()
        while samples.get("streamlab_slot_held_after_disconnect_seconds_count", 0) < 1 \
                and time.monotonic() < deadline:
            time.sleep(0.05)  # poll: the slot is freed on the decode thread
            samples = server.metrics()
        count = samples.get("streamlab_slot_held_after_disconnect_seconds_count", 0)
        held = samples.get("streamlab_slot_held_after_disconnect_seconds_sum", 0) / max(1, count)
        result["disconnect"] = {"slot_held_after_disconnect_ms": held * 1e3, "counted": count,
                                "bound_ms": 2 * step_ms + 5,
                                "within_bound": count >= 1 and held * 1e3 <= 2 * step_ms + 5}
    (out / "gpu.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "gpu.md").write_text(markdown(result))
    return result


def markdown(r: dict[str, Any]) -> str:
    lines = [f"# The engine on {r['device']} (model size {r['size']})", "",
             "| batch | tokens/s | step median (ms) | step p99 (ms) |", "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {e['batch']} | {e['tokens_per_s']:,.0f} | {e['step_ms_median']} | {e['step_ms_p99']} |"
              for e in r["engine"]]
    lines += ["", "| arrivals | TTFT p50 (ms) | TTFT p99 (ms) | failed |", "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {n} | {t['p50_s'] * 1e3:.1f} | {t['p99_s'] * 1e3:.1f} | {t['failed']} |"
              for n, t in r["ttft"].items()]
    f, d = r["framing"], r["disconnect"]
    lines += ["", f"- SSE framing: {f['outcome']}, {f['content_events']} content events (one per "
                  f"token of the script), exact text: {f['script_match']}, [DONE]: {f['saw_done']}",
              f"- disconnect after 5 events: slot held {d['slot_held_after_disconnect_ms']:.2f} ms "
              f"after the server saw the client go (median step {r['step_ms_median']} ms; bound: two "
              f"steps + 5 ms of scheduling, {d['bound_ms']:.1f} ms): {d['within_bound']}", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--size", choices=("gpu", "tiny"), default="gpu")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "bench-gpu")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            parser.error("torch sees no CUDA device: run with --device cpu for the CPU path")
    result = run(args.device, args.size, args.out)
    print(markdown(result))
    ok = result["disconnect"]["within_bound"] and result["framing"]["script_match"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
