"""Engine benchmark: tokens/s and step time of the transformers engine, batch 1 and the slot limit.

    python -m server.tools.engine_bench --json reports/bench/engine.json            # tiny model, CPU
    python -m server.tools.engine_bench --device cuda --size gpu --json gpu.json    # a CUDA machine
    python -m server.tools.engine_bench --compare-cb                                # + transformers CB

The model is built with server.tools.model_builder when the folder is missing (`.models/<size>`), so
the GPU run needs nothing but this repository. Each figure goes through the real engine (the
scheduler, its thread, asyncio hand-off), not a bare forward loop; step times are read from the
scheduler. On CUDA each step ends with a device-to-host copy of the chosen ids (`.tolist()`),
so the wall-clock figures include the GPU work without explicit synchronisation.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from server.engine import (  # noqa: E402  (environment first)
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    create_engine,
    load_tokenizer,
)
from server.engine.scheduler import Scheduler  # noqa: E402
from server.locations import corpus_files  # noqa: E402


def _prompt(tokenizer: Any, n_tokens: int) -> list[int]:
    """A chat prompt of about n_tokens tokens, built from the shipped corpus."""
    text = " ".join(p.read_text(encoding="utf-8") for p in corpus_files())
    body = tokenizer.encode(text, add_special_tokens=False)
    while len(body) < n_tokens:
        body = body + body
    content = tokenizer.decode(body[: max(1, n_tokens - 8)])
    ids = tokenizer.apply_chat_template([{"role": "user", "content": content}],
                                        add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)[:n_tokens]


async def _generate(engine: Scheduler, prompt: list[int], n: int) -> tuple[int, float]:
    """Greedy, no eos: exactly n tokens. Returns (tokens, time to first token)."""
    t0 = time.perf_counter()
    gen = engine.submit(GenerationRequest(prompt_ids=prompt, max_new_tokens=n,
                                          sampling=SamplingParams(temperature=0.0)))
    count, ttft = 0, 0.0
    async for _ in gen:
        if count == 0:
            ttft = time.perf_counter() - t0
        count += 1
    return count, ttft


async def _batch_run(engine: Scheduler, prompt: list[int], batch: int, n: int) -> dict[str, Any]:
    engine.step_times.clear()
    t0 = time.perf_counter()
    results = await asyncio.gather(*[_generate(engine, prompt, n) for _ in range(batch)])
    wall = time.perf_counter() - t0
    tokens = sum(r[0] for r in results)
    full = [s for b, s in engine.step_times if b == batch] or [s for _, s in engine.step_times]
    return {
        "batch": batch,
        "tokens": tokens,
        "wall_s": round(wall, 4),
        "tokens_per_s": round(tokens / wall, 1),
        "step_ms_median": round(statistics.median(full) * 1e3, 3),
        "step_ms_p99": round(sorted(full)[int(0.99 * (len(full) - 1))] * 1e3, 3),
        "ttft_ms_median": round(statistics.median(r[1] for r in results) * 1e3, 2),
    }


async def _cancel_latency(engine: Scheduler, prompt: list[int], tries: int = 5) -> dict[str, Any]:
    """Read a few tokens of a long generation, cancel, poll until the slot is free."""
    latencies: list[float] = []
    for _ in range(tries):
        gen = engine.submit(GenerationRequest(prompt_ids=prompt, max_new_tokens=100_000,
                                              sampling=SamplingParams(temperature=0.0)))
        seen = 0
        async for _ in gen:
            seen += 1
            if seen == 5:
                break
        t0 = time.perf_counter()
        gen.cancel()
        while engine.slots_in_use:
            await asyncio.sleep(0.0002)
        latencies.append(time.perf_counter() - t0)
    return {"cancel_to_slot_free_ms_median": round(statistics.median(latencies) * 1e3, 3),
            "cancel_to_slot_free_ms_max": round(max(latencies) * 1e3, 3)}


async def bench_engine(model: str, device: str, slots: int, n_tokens: int, prompt_tokens: int,
                       threads: int) -> dict[str, Any]:
    tokenizer = load_tokenizer(model)
    engine = create_engine(EngineConfig(kind="transformers", model=model, device=device,
                                        slots=slots, max_queue=slots, torch_threads=threads),
                           tokenizer)
    assert isinstance(engine, Scheduler)
    t0 = time.perf_counter()
    await engine.start()
    load_s = time.perf_counter() - t0
    prompt = _prompt(tokenizer, prompt_tokens)
    try:
        await _batch_run(engine, prompt, 1, 5)  # warm-up
        runs = [await _batch_run(engine, prompt, 1, n_tokens),
                await _batch_run(engine, prompt, slots, n_tokens)]
        cancel = await _cancel_latency(engine, prompt)
    finally:
        await engine.close()
    return {"engine": engine.describe(), "load_s": round(load_s, 2), "prompt_tokens": len(prompt),
            "new_tokens": n_tokens, "runs": runs, **cancel}


def bench_transformers_cb(model: str, slots: int, n_tokens: int, prompt_tokens: int,
                          threads: int) -> dict[str, Any]:
    """The alternative we did not choose: transformers' own continuous batching manager."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.set_num_threads(threads)
    tokenizer = load_tokenizer(model)
    prompt = _prompt(tokenizer, prompt_tokens)
    m = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    never = len(tokenizer) + 10  # an eos that never comes: exactly n tokens
    gc = GenerationConfig(max_new_tokens=n_tokens, do_sample=False, eos_token_id=never,
                          pad_token_id=tokenizer.pad_token_id)
    mgr = m.init_continuous_batching(generation_config=gc)
    mgr.start()

    def run(batch: int, n: int) -> tuple[int, float]:
        t0 = time.perf_counter()
        ids = [mgr.add_request(prompt, max_new_tokens=n, eos_token_id=never) for _ in range(batch)]
        tokens = 0
        for rid in ids:
            for out in mgr.request_id_iter(rid):
                if out.is_finished():
                    tokens += len(out.generated_tokens)
        return tokens, time.perf_counter() - t0

    try:
        t0 = time.perf_counter()
        run(1, 5)
        warmup = time.perf_counter() - t0
        result: dict[str, Any] = {"first_request_s": round(warmup, 2), "runs": []}
        for batch in (1, slots):
            tokens, wall = run(batch, n_tokens)
            result["runs"].append({"batch": batch, "tokens": tokens,
                                   "tokens_per_s": round(tokens / wall, 1),
                                   "step_ms_mean": round(wall / n_tokens * 1e3, 3)})
        # Run-ahead: a streaming client that stops reading for 200 ms.
        rid = mgr.add_request(prompt, max_new_tokens=100_000, streaming=True, eos_token_id=never)
        it = mgr.request_id_iter(rid)
        next(it)
        time.sleep(0.2)
        mgr.cancel_request(rid)
        ahead = 0
        deadline = time.perf_counter() + 0.5
        while time.perf_counter() < deadline:
            out = mgr.get_result(request_id=rid, timeout=0.05)
            if out is not None:
                ahead = max(ahead, len(out.generated_tokens))
        result["tokens_computed_while_client_read_none_for_200ms"] = ahead
    finally:
        mgr.stop(block=True, timeout=5)
    return result


def _ensure_model(model: str | None, size: str) -> str:
    path = Path(model or f".models/{size}")
    if not (path / "config.json").is_file():
        if model is not None and not path.exists() and "/" in str(model) and not path.is_absolute():
            return str(model)  # a hub id, already in the local cache
        from server.tools.model_builder import build

        print(f"building the {size} model into {path} ...", file=sys.stderr)
        build(path, size=size)
    return str(path)


def _table(result: dict[str, Any]) -> str:
    lines = [f"engine: {result['engine']}",
             f"prompt {result['prompt_tokens']} tokens, {result['new_tokens']} new tokens per "
             f"request, load {result['load_s']} s",
             f"{'batch':>5} {'tok/s':>9} {'step ms (median)':>17} {'step ms (p99)':>14} "
             f"{'TTFT ms':>8}"]
    for r in result["runs"]:
        lines.append(f"{r['batch']:>5} {r['tokens_per_s']:>9.1f} {r['step_ms_median']:>17.3f} "
                     f"{r['step_ms_p99']:>14.3f} {r['ttft_ms_median']:>8.2f}")
    lines.append(f"cancel -> slot free: median {result['cancel_to_slot_free_ms_median']} ms, "
                 f"max {result['cancel_to_slot_free_ms_max']} ms")
    cb = result.get("transformers_continuous_batching")
    if cb:
        lines.append(f"transformers continuous batching: first request {cb['first_request_s']} s, "
                     + ", ".join(f"batch {r['batch']}: {r['tokens_per_s']} tok/s, "
                                 f"{r['step_ms_mean']} ms/step" for r in cb["runs"])
                     + f"; computed ahead for an idle reader (200 ms): "
                       f"{cb['tokens_computed_while_client_read_none_for_200ms']} tokens")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.tools.engine_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default .models/<size>)")
    parser.add_argument("--size", choices=["tiny", "gpu"], default="tiny")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per request")
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--compare-cb", action="store_true",
                        help="also measure transformers' init_continuous_batching (CPU)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)

    model = _ensure_model(args.model, args.size)
    result = asyncio.run(bench_engine(model, args.device, args.slots, args.tokens,
                                      args.prompt_tokens, args.threads))
    if args.compare_cb:
        result["transformers_continuous_batching"] = bench_transformers_cb(
            model, args.slots, args.tokens, args.prompt_tokens, args.threads)
    import torch
    import transformers

    result["versions"] = {"python": platform.python_version(), "torch": torch.__version__,
                          "transformers": transformers.__version__}
    result["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                         "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    print(_table(result))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
