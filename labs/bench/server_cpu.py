"""Part 2, `server-cpu`: server CPU per token without and with write coalescing (`lab.coalesce_ms`),
at a realistic per-stream rate (20 tok/s) and at a fast one (200 tok/s); then at 1,000 streams x
20 tok/s without coalescing (target under 10 us/token), beside a plain FastAPI streaming endpoint
(labs/bench/plain_server.py) given the same streams in the same run."""
from __future__ import annotations

from typing import Any

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
                   "gap_p99_s": step.gap_p99_s, "failed": step.failed, "rate_pct": step.rate_pct}
        progress(f"server CPU: {streams} streams x {rate:g} tok/s, plain FastAPI endpoint")
        plain_row = _plain(lab, streams, duration_s, progress)
    lab_row["target_met"] = lab_row["server_cpu_us_per_token"] < TARGET_US_PER_TOKEN
    return {"duration_s": duration_s, "rows": rows, "many": [lab_row, plain_row],
            "target_us_per_token": TARGET_US_PER_TOKEN}


def _plain(lab: LoadLab, streams: int, duration_s: float, progress: Progress) -> dict[str, Any]:
    """The same streams against labs/bench/plain_server.py (its own process, same uvicorn)."""
    import sys
    import tempfile
    from pathlib import Path

    from labs.load.streams import _lean_many, _no_gc_pauses, _runner
    from labs.resources import Sampler
    from server.processes import ManagedProcess, free_port, managed, port_accepts

    port = free_port()
    tokens = max(2, round(duration_s * lab.tokens_per_s))
    body = lab.body(path_to(None), tokens)
    folder = Path(tempfile.mkdtemp(prefix="plain-server-"))
    process = ManagedProcess("plain-fastapi", [sys.executable, "-m", "labs.bench.plain_server",
                                               "--port", str(port)], folder / "server.log")
    with managed(process, lambda: port_accepts(port)) as started:
        with Sampler({"server": started.pid}) as sampler, _runner() as runner, _no_gc_pauses():
            batch = runner.run(_lean_many(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                          streams, 3 * duration_s + 15.0))
    delivered = sum(r.content_events for r in batch.results)
    gaps = [g for r in batch.results for g in r.gaps]
    from labs.measurements import percentile
    return {"server": "plain FastAPI", "streams": streams, "tokens": delivered,
            "server_cpu_us_per_token": sampler.usage["server"].cpu_s / max(1, delivered) * 1e6,
            "gap_p99_s": percentile(gaps, 99),
            "failed": sum(r.outcome != "complete" for r in batch.results)}
