"""Part 2, `server-cpu`: server CPU per token without and with write coalescing (`lab.coalesce_ms`),
at a realistic per-stream rate (20 tok/s) and at a fast one (200 tok/s)."""
from __future__ import annotations

from typing import Any

from labs.bench.proxies import Progress, path_to
from labs.load import SYNTHETIC, LoadLab

CPU_CASES = ((300, 20.0), (100, 200.0))  # (streams, tok/s per stream): same tokens/s order


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
    return {"duration_s": duration_s, "rows": rows}
