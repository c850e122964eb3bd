"""Part 2, `server-cpu`: server CPU per token without and with write coalescing (`lab.coalesce_ms`),
at a realistic per-stream rate (20 tok/s) and at a fast one (200 tok/s); then at 1,000 streams x
20 tok/s without coalescing (target under 10 us/token), beside the reference servers given the
same streams in the same run (labs/bench/references.py: a plain FastAPI streaming endpoint, and a
bare asyncio server, the floor of a Python server here); a missed target says why (`reason`)."""
from __future__ import annotations

import os
from typing import Any

from labs.bench import references
from labs.bench.proxies import Progress, path_to
from labs.load import SYNTHETIC, LoadLab

CPU_CASES = ((300, 20.0), (100, 200.0))  # (streams, tok/s per stream): same tokens/s order
MANY = (1000, 20.0)  # the target case: no coalescing, beside the plain endpoint
TARGET_US_PER_TOKEN = 10.0


def bench_server_cpu(duration_s: float, progress: Progress) -> dict[str, Any]:
    rows = []
    with LoadLab(duration_s=duration_s, progress=progress) as lab:
        server = lab.server(SYNTHETIC)
        for streams, rate in CPU_CASES:
            for coalesce in (0.0, 25.0):
                progress(f"server CPU: {streams} streams x {rate:g} tok/s, coalesce {coalesce:g} ms")
                lab.tokens_per_s = rate
                step = lab.run_step(path_to(None), streams, server, None, {"coalesce_ms": coalesce})
                tokens = step.server_tokens or 1
                rows.append({"streams": streams, "tokens_per_s_per_stream": rate,
                             "coalesce_ms": coalesce, "tokens": step.server_tokens,
                             "server_cpu_s": step.server["cpu_s"],
                             "server_cpu_us_per_token": step.server["cpu_s"] / tokens * 1e6,
                             "writes_per_token": step.server_writes / tokens,
                             "client_cpu_us_per_event": step.client_cpu_per_event_us,
                             "gap_p50_s": step.gap_p50_s, "gap_p99_s": step.gap_p99_s,
                             "failed": step.failed, "rate_pct": step.rate_pct})
        streams, rate = MANY
        progress(f"server CPU: {streams} streams x {rate:g} tok/s, no coalescing")
        lab.tokens_per_s = rate
        step = lab.run_step(path_to(None), streams, server, None, {"coalesce_ms": 0.0})
        lab_row = {"server": "streamlab", "streams": streams, "tokens": step.server_tokens,
                   "server_cpu_us_per_token": step.server["cpu_s"] / max(1, step.server_tokens) * 1e6,
                   "gap_p99_s": step.gap_p99_s, "failed": step.failed, "rate_pct": step.rate_pct,
                   "machine_busy_pct": step.machine_busy_pct}
        body = lab.body(path_to(None), max(2, round(duration_s * rate)))
        refs = []
        with references.references() as servers:
            for name, (url, pid) in servers.items():
                progress(f"server CPU: {streams} streams x {rate:g} tok/s, reference: {name}")
                measured = references.measure(url, pid, references.reference_body(name, body),
                                              streams, 3 * duration_s + 15.0)
                refs.append({"server": name, "streams": streams, "tokens": measured["events"],
                             "server_cpu_us_per_token": measured["server_cpu_s"]
                             / max(1, measured["events"]) * 1e6,
                             "gap_p99_s": measured["gap_p99_s"], "failed": measured["failed"],
                             "machine_busy_pct": measured["machine_busy_pct"]})
    lab_row["target_met"] = lab_row["server_cpu_us_per_token"] < TARGET_US_PER_TOKEN
    result = {"duration_s": duration_s, "rows": rows, "many": [lab_row, *refs],
              "target_us_per_token": TARGET_US_PER_TOKEN, "load_average_1m": os.getloadavg()[0]}
    result["reason"] = reason(result)
    return result


def reason(result: dict[str, Any]) -> str | None:
    """Why the target is missed, from the same run's figures (None when it is met)."""
    lab, *refs = result["many"]
    if lab.get("target_met"):
        return None
    target = result["target_us_per_token"]
    text = (f"streamlab: {lab['server_cpu_us_per_token']:.1f} us/token against < {target:g} "
            f"({lab['server_cpu_us_per_token'] / target:.2f}x)")
    for ref in refs:
        text += (f"; {ref['server']}: {ref['server_cpu_us_per_token']:.1f} us/token "
                 f"(streamlab / it: {lab['server_cpu_us_per_token'] / max(1e-9, ref['server_cpu_us_per_token']):.2f}x)")
    floor = next((r for r in refs if r["server"] == references.BARE), None)
    if floor is not None and floor["server_cpu_us_per_token"] >= 0.5 * target:
        text += (f". A bare asyncio server (uvloop, one write per token, no HTTP library, no "
                 f"framework) already needs {floor['server_cpu_us_per_token'] / target:.0%} of the "
                 f"target on this machine: each token is one send() system call and one task "
                 f"wake-up, so the target holds only with writes coalesced (the rows above)")
    return text + "."
