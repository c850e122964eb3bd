"""Part 2, `server-cpu`: server CPU per token without and with write coalescing (`lab.coalesce_ms`),
at a realistic per-stream rate (20 tok/s) and at a fast one (200 tok/s); then at 1,000 streams x
20 tok/s without coalescing, beside the reference servers given the same streams in the same run
(labs/bench/references.py: a plain FastAPI streaming endpoint, a raw ASGI app on the lab's own
HTTP stack, a bare asyncio server, and a protocol straight on httptools). Target (issue 40): at
most 1.3x the raw ASGI app's CPU per token, the same streams on the same uvicorn, httptools and
uvloop (an ASGI app that only streams: the least any app on this stack costs). A miss says why
(`reason`), and without the raw ASGI app's figure the verdict is "skipped", never a pass. The
earlier target (issue 27: at most 1.5x the bare asyncio server) sat below the stack's own floor:
the raw ASGI app alone costs 1.1-1.4x the bare server per token (docs/performance.md)."""
from __future__ import annotations

import os
from typing import Any

from labs.bench import references
from labs.bench.proxies import Progress, path_to
from labs.bench.verdicts import at_most
from labs.load import SYNTHETIC, LoadLab

CPU_CASES = ((300, 20.0), (100, 200.0))  # (streams, tok/s per stream): same tokens/s order
MANY = (1000, 20.0)  # the target case: no coalescing, beside the plain endpoint
TARGET_RATIO = 1.3  # server CPU per token / the raw ASGI app's on the same stack, same streams, same run


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
    result = {"duration_s": duration_s, "rows": rows, "many": [lab_row, *refs],
              "target_ratio": TARGET_RATIO, "load_average_1m": os.getloadavg()[0]}
    judge(result)
    result["reason"] = reason(result)
    return result


def judge(result: dict[str, Any]) -> None:
    """Every row's ratio to the raw ASGI app; the lab's verdict (None: skipped, with why)."""
    lab, *refs = result["many"]
    floor = next((r for r in refs if r["server"] == references.RAW_ASGI), None)
    usable = floor is not None and floor["tokens"] and not floor["failed"]
    for row in result["many"]:
        row["ratio_to_raw"] = (row["server_cpu_us_per_token"] / floor["server_cpu_us_per_token"]
                               if usable and floor["server_cpu_us_per_token"] else None)
    if lab["ratio_to_raw"] is None:
        lab["target_met"] = None
        lab["skipped"] = f"the {references.RAW_ASGI} reference gave no usable figure in this run"
    else:
        lab["target_met"] = at_most(lab["ratio_to_raw"], TARGET_RATIO) and not lab["failed"]


def reason(result: dict[str, Any]) -> str | None:
    """Why the target is missed, from the same run's figures (None when it is met or skipped)."""
    lab, *refs = result["many"]
    if lab.get("target_met") is not False:
        return None
    text = (f"streamlab: {lab['server_cpu_us_per_token']:.1f} us/token, "
            f"{lab['ratio_to_raw']:.2f}x the raw ASGI app's on the same stack (target "
            f"at most {result['target_ratio']:g}x)")
    if lab["failed"]:
        text += f", {lab['failed']} streams failed"
    for ref in refs:
        text += (f"; {ref['server']}: {ref['server_cpu_us_per_token']:.1f} us/token "
                 f"(streamlab / it: {lab['server_cpu_us_per_token'] / max(1e-9, ref['server_cpu_us_per_token']):.2f}x)")
    return text + (". The raw ASGI app's whole cost is uvicorn's send and one task wake-up per token; "
                   "where the rest goes: `python -m labs.bench.profile --streams 1000` "
                   "(docs/performance.md).")
