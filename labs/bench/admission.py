"""Part `admission`: 1,000 requests arriving in the same instant, TTFT p50/p99, on the synthetic
engine, direct and through each fixed proxy config, with one server process and with
`--workers 2`, in one run.

Each burst opens every stream at once (3 tokens at 20 tok/s: the first token is due at once,
so TTFT is admission: accept, HTTP parse, JSON, validation, template, tokenization, the slot,
the headers and the first frames). Rounds interleave the paths so that the machine's noise hits
all of them alike; the verdict reads the median of the rounds' p99, and the table shows every
round's. Server CPU per admitted request is the server's whole process tree (every worker).

Targets: TTFT p99 under 300 ms direct and under 400 ms through each fixed config.
"""
from __future__ import annotations

import contextlib
import statistics
from typing import Any

from labs.bench.proxies import PROXIES, Progress, path_to
from labs.load import LoadLab, LoadPath, ServerSpec

ARRIVALS = 1000
ROUNDS = 3
BURST_TOKENS_S = 0.15  # 3 tokens at 20 tok/s per stream
WORKERS = (1, 2)
TARGET_DIRECT_P99_S = 0.300
TARGET_PROXY_P99_S = 0.400


def _burst_path(proxy: str | None) -> LoadPath:
    base = path_to(proxy)
    return LoadPath(base.name, base.role, base.limit, proxy=proxy, duration_s=BURST_TOKENS_S)


def bench_admission(progress: Progress, arrivals: int = ARRIVALS, rounds: int = ROUNDS) -> dict[str, Any]:
    configs: dict[str, Any] = {}
    for workers in WORKERS:
        spec = ServerSpec(workers=workers)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in ("direct", *PROXIES)}
        with LoadLab(progress=progress) as lab, contextlib.ExitStack() as stack:
            server = lab.server(spec)
            proxies = {p: stack.enter_context(lab.proxy(path_to(p), server.port)) for p in PROXIES}
            for round_ in range(rounds):
                for name in rows:
                    progress(f"admission: --workers {workers}, {arrivals} arrivals, {name}, "
                             f"round {round_ + 1}/{rounds}")
                    step = lab.run_step(_burst_path(None if name == "direct" else name), arrivals,
                                        server, proxies.get(name))
                    rows[name].append({
                        "ttft_p50_s": step.ttft_p50_s, "ttft_p99_s": step.ttft_p99_s,
                        "ttft_max_s": step.ttft_max_s, "failed": step.failed,
                        "server_cpu_us_per_request": step.server["cpu_s"] / arrivals * 1e6,
                        "machine_busy_pct": step.machine_busy_pct,
                        "tcp_counters": step.tcp_counters})
        configs[f"workers={workers}"] = {name: summarize(name, runs) for name, runs in rows.items()}
    return {"arrivals": arrivals, "rounds": rounds, "configs": configs,
            "targets_s": {"direct": TARGET_DIRECT_P99_S, "proxy": TARGET_PROXY_P99_S}}


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    p99s = [r["ttft_p99_s"] for r in runs if r["ttft_p99_s"] is not None]
    p50s = [r["ttft_p50_s"] for r in runs if r["ttft_p50_s"] is not None]
    target = TARGET_DIRECT_P99_S if name == "direct" else TARGET_PROXY_P99_S
    median_p99 = statistics.median(p99s) if p99s else None
    return {"runs": runs, "ttft_p50_median_s": statistics.median(p50s) if p50s else None,
            "ttft_p99_median_s": median_p99, "target_p99_s": target,
            "failed": sum(r["failed"] or 0 for r in runs),
            "server_cpu_us_per_request": statistics.median(r["server_cpu_us_per_request"] for r in runs),
            "met": median_p99 is not None and median_p99 < target
            and not any(r["failed"] for r in runs)}


def markdown_lines(result: dict[str, Any]) -> list[str]:
    n, rounds = result["arrivals"], result["rounds"]
    lines = [f"## Admission: {n:,} simultaneous arrivals (synthetic engine, {rounds} rounds)", "",
             "| server | path | TTFT p50 (ms) | TTFT p99 median (ms) | p99 each round (ms) "
             "| server CPU us/request | failed | target |",
             "| --- | --- |" + " ---: |" * 5 + " --- |"]
    for config, paths in result["configs"].items():
        for name, row in paths.items():
            each = " / ".join("-" if r["ttft_p99_s"] is None else f"{r['ttft_p99_s'] * 1e3:.0f}"
                              for r in row["runs"])
            p50, p99 = row["ttft_p50_median_s"], row["ttft_p99_median_s"]
            lines.append(
                f"| {config.replace('workers=', '--workers ')} | {name} | "
                f"{'-' if p50 is None else f'{p50 * 1e3:.0f}'} | "
                f"{'-' if p99 is None else f'{p99 * 1e3:.0f}'} | {each} | "
                f"{row['server_cpu_us_per_request']:.0f} | {row['failed']} | "
                f"< {row['target_p99_s'] * 1e3:.0f} ms: {'yes' if row['met'] else '**no**'} |")
    return lines + [""]
