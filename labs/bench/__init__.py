"""`python -m labs bench` (`make bench`): every benchmark of the project in one run.

    python -m labs bench                       # everything, ~3 minutes on 2 cores
    python -m labs bench --only proxies --streams 300

Writes reports/bench/<part>.json and reports/bench/bench.md (the tables docs/benchmarks.md
quotes), with a progress bar and the time left while it runs. One module per part:

    admission         0. 1,000 simultaneous arrivals on the synthetic engine, direct and through
                      each fixed config, --workers 1 and 2, beside the reference servers:
                      TTFT p50/p99, CPU per request, the target, and why it is missed
    prefill           0b. the tiny model, 8/32/64 simultaneous arrivals, TTFT with serial and
                      batched prefill (short and long prompts)
    proxies           1. each fixed proxy config (proxies/fixed/) against direct: TTFT at one
                      stream, gap p99 and hop delay, then 1,000 streams at 20 tok/s; the targets
    server_cpu        2. server CPU per token without and with write coalescing; 1,000 streams x
                      20 tok/s beside the reference servers; the target, and why it is missed
    apis              2b. what each wire protocol costs (chat, responses, messages: the server's
                      table): CPU per token and per request, bytes, as ratios to chat's and the
                      raw ASGI app's; the target (each at most 1.25x chat's per token)
    accounting        2c. token accounting in Envoy 1.40 (envoy-token-accounting): Envoy's and the
                      ext_proc processor's CPU per SSE event, plain, sse_to_metadata, ext_proc
                      STREAMED and BUFFERED, as ratios to plain; hop latency, TTFT, the counts
    references        the reference servers: plain FastAPI (plain_server) and bare asyncio
    profile           `python -m labs.bench.profile`: py-spy on the server during a burst or
                      many streams, the path's phases (not a part of `make bench`)
    modules           3 and 4. `python -m server.tools.bench` (framing, the whole server path) and
                      `python -m server.tools.engine_bench` (tiny model tokens/s), as subprocesses
    measuring_client  5. the measuring client's own cost against a bare asyncio SSE server
    tools             6. `labs verify` (--quick and default) of an exported config and a default
                      `labs probe` of one path, as a user runs them: wall time, CPU, the targets
    gpu               `make bench-gpu`: the engine on a CUDA GPU (not a part of `make bench`)
    peers/            `make bench-peers`: the lab client beside AIPerf and guidellm (not a part
                      of `make bench`); install (their venvs), lab, aiperf, guidellm (each
                      tool's command and output parser), table (the side-by-side table), compare
                      (the run); tree_cpu (a process tree's CPU)
    markdown          bench.md
    verdicts          the verdict over the parts run and the exit status: 0 every target met,
                      1 a target missed, 2 a part failed or a target could not be judged
    progress          the progress bar (redrawn by hand: no thread beside the measurements)
    cli               the command line, the parts in order, the files it writes
"""
from __future__ import annotations

from labs.bench.cli import PARTS, main

__all__ = ["PARTS", "main"]
