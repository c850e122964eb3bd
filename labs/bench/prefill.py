"""Part `prefill`: the tiny transformers model, 8, 32 and 64 requests arriving at once, TTFT
p50/p99 with the prompts prefilled one pass each (`--serial-prefill`, how the engine worked
before) and together (batched prefill, the default), in one run.

Every request carries the same chat prompt, short (25 tokens, the load lab's) or long (~200
tokens), and a 4-token script (teacher-forced: a real forward pass per token), unpaced, so TTFT
is admission + prefill + the first decode step. Measured here (one torch thread): prefilling
64 short prompts took 188 ms one pass each and 44 ms together; 64 long ones 1.25 s and 1.43 s,
since a 200-token prompt already fills the CPU's matrix units and batching only adds padding.
On a GPU the long prompts batch too (`make bench-gpu`).
The servers have 64 slots, so no request waits for a slot. Both servers run at once and every
burst alternates between them, so the machine's noise hits both alike; the table shows the
median of the rounds.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import statistics
from typing import Any

from labs import client
from labs.bench.proxies import Progress
from labs.client.driver import no_gc_pauses, uvloop_runner
from labs.load import script
from labs.client.results import percentile

COUNTS = (8, 32, 64)
ROUNDS = 3
PROMPT_TEXT = "Tell me about streaming through proxies, please. " * 9  # ~200 tokens
PROMPTS = {"short": "Tell me something, one token at a time.", "long": PROMPT_TEXT}
SERVER_ARGS = ["--engine", "transformers", "--device", "cpu", "--slots", "64", "--max-queue", "64",
               "--log-level", "warning"]
MODES = {"serial": ["--serial-prefill"], "batched": []}


def _body(model: str, prompt: str = PROMPT_TEXT) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "stream": True, "max_tokens": 4, "lab": {"script": script(4)}}).encode()


def bench_prefill(progress: Progress, counts: tuple[int, ...] = COUNTS,
                  rounds: int = ROUNDS) -> dict[str, Any]:
    from labs.lab.server import served_model
    from server.launcher import running_server

    results: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
        p: {m: {str(n): [] for n in counts} for m in MODES} for p in PROMPTS}
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        for mode, flags in MODES.items():  # both up at once: their rounds interleave
            progress(f"prefill: starting the tiny-model server ({mode})")
            server = stack.enter_context(running_server([*SERVER_ARGS, *flags]))
            urls[mode] = server.url + "/v1/chat/completions"
        model = served_model(server.url)
        with uvloop_runner() as runner, no_gc_pauses():
            for url in urls.values():
                runner.run(client.measure_stream(url, _body(model)))  # warm: first-request code
            for round_, (prompt, text), n in itertools.product(range(rounds), PROMPTS.items(), counts):
                body = _body(model, text)
                for mode, url in urls.items():
                    progress(f"prefill: {n} arrivals, {prompt} prompt, {mode}, round {round_ + 1}/{rounds}")
                    batch = runner.run(client.run_many(url, [body] * n, n, 60.0))
                    ttfts = [r.ttft_s for r in batch.results if r.ttft_s is not None]
                    results[prompt][mode][str(n)].append({
                        "ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
                        "failed": sum(r.outcome != "complete" for r in batch.results)})
    table = {prompt: {mode: {n: {key: statistics.median(r[key] for r in runs if r[key] is not None)
                                 for key in ("ttft_p50_s", "ttft_p99_s")}
                             | {"failed": sum(r["failed"] for r in runs)}
                             for n, runs in per_n.items()} for mode, per_n in modes.items()}
             for prompt, modes in results.items()}
    return {"counts": list(counts), "rounds": rounds, "runs": results, "median": table}


def markdown_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"## Batched prefill: tiny model, simultaneous arrivals (median of {result['rounds']} rounds)",
             "", "| prompt | arrivals | TTFT p50 serial (ms) | TTFT p99 serial (ms) | TTFT p50 batched (ms) "
             "| TTFT p99 batched (ms) | p99 batched / serial |", "| --- |" + " ---: |" * 6]
    for (prompt, med), n in itertools.product(result["median"].items(), map(str, result["counts"])):
        s, b = med["serial"][n], med["batched"][n]
        ratio = b["ttft_p99_s"] / s["ttft_p99_s"] if s["ttft_p99_s"] else None
        lines.append(f"| {prompt} | {n} | {s['ttft_p50_s'] * 1e3:.0f} | {s['ttft_p99_s'] * 1e3:.0f} | "
                     f"{b['ttft_p50_s'] * 1e3:.0f} | {b['ttft_p99_s'] * 1e3:.0f} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}x'} |")
    return lines + [""]
