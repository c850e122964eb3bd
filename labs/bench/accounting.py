"""Part `accounting`: what counting tokens in Envoy costs per SSE event (envoy-token-accounting).

One synthetic server, four Envoys 1.40 started one after another on the same stream workload
(STREAMS streams at once, EVENTS events each at RATE tok/s, `stamp` on, every frame holding a
character of two bytes split in two writes by `split_utf8_ms`):

    plain            no accounting
    sse_to_metadata  the observe-only filter (usage.completion_tokens into dynamic metadata)
    ext_proc STREAMED  each body chunk to the Python gRPC processor (proxies/envoy/token_counter.py)
    ext_proc BUFFERED  the whole body to it at the end

Per path: Envoy's CPU per event (and the processor's, for ext_proc), as a ratio to plain's in the
same run; the added latency per event (the server's `sent_at` stamp to the client's read, p50 and
p99); TTFT p50; and whether each stream's count (the access log's) equals the usage its client got.
No target: the numbers say what the observe-only filter costs beside the processor.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
from typing import Any, Iterator, Mapping

import psutil

from labs.bench.proxies import Progress
from labs.client.http1 import run_many
from labs.client.results import percentile
from proxies import EnvoySettings
from proxies.runtime import get_runtime
from server.launcher import running_server
from server.processes import free_port

STREAMS, EVENTS, RATE = 20, 200, 50.0  # 4,000 events per path, 4 s each
WORD = "café "  # one token per frame, each frame split inside the é
PATHS: dict[str, dict[str, Any]] = {
    "plain": {},
    "sse_to_metadata": {"sse_to_metadata": True},
    "ext_proc STREAMED": {"ext_proc_body_mode": "STREAMED"},
    "ext_proc BUFFERED": {"ext_proc_body_mode": "BUFFERED"},
}
COUNT_FIELD = re.compile(r"\b(?:counted|tokens)=(\S+)")


def _body(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "count"}], "stream": True,
            "max_tokens": EVENTS, "stream_options": {"include_usage": True},
            "lab": {"script": WORD * EVENTS, "tokens_per_s": RATE, "stamp": True, "split_utf8_ms": 2.0}}


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


def _processors() -> list[int]:
    """The token counter processes this process started (the Envoy kind's helper)."""
    me = psutil.Process()
    return [child.pid for child in me.children(recursive=True)
            if any("token_counter.py" in part for part in _cmdline(child))]


def _cmdline(process: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return process.cmdline()
    return []


@contextlib.contextmanager
def _envoy(settings: Mapping[str, Any], upstream_port: int) -> Iterator[Any]:
    chosen = EnvoySettings(listen_port=free_port(), admin_port=free_port(), upstream_port=upstream_port,
                           **settings)
    with get_runtime("local").run_proxy(chosen) as proxy:
        yield proxy


def _measure(name: str, settings: Mapping[str, Any], server: Any, model: str) -> dict[str, Any]:
    with _envoy(settings, server.port) as proxy:
        processors = _processors()
        pids = [proxy.pid]
        before_envoy, before_processor = _cpu_s(pids), _cpu_s(processors)
        batch = asyncio.run(run_many(proxy.url + "/v1/chat/completions", [_body(model)] * STREAMS, STREAMS,
                                     total_timeout_s=60.0))
        envoy_cpu, processor_cpu = _cpu_s(pids) - before_envoy, _cpu_s(processors) - before_processor
        logged = proxy.wait_access_log(STREAMS, timeout_s=10.0)
    results = batch.results
    events = sum(result.content_events for result in results)
    hops = [delay for result in results for delay in result.hop_delays]
    counts = [match.group(1) for line in logged if (match := COUNT_FIELD.search(line))]
    usage = [str((result.usage or {}).get("completion_tokens")) for result in results]
    return {"path": name, "streams": len(results), "events": events,
            "complete": sum(result.outcome == "complete" for result in results),
            "envoy_cpu_us_per_event": envoy_cpu / max(1, events) * 1e6,
            "processor_cpu_us_per_event": processor_cpu / max(1, events) * 1e6 if processors else None,
            "hop_p50_s": percentile(hops, 50), "hop_p99_s": percentile(hops, 99),
            "ttft_p50_s": statistics.median([r.ttft_s for r in results if r.ttft_s is not None] or [0.0]),
            "counted_right": sorted(counts) == sorted(usage) if counts else None}


def bench_accounting(progress: Progress) -> dict[str, Any]:
    rows = []
    # Every stream in a slot of its own (the synthetic engine's default is fewer): TTFT is the path's.
    with running_server(["--engine", "synthetic", "--slots", str(STREAMS)]) as server:
        model = "tiny"  # the synthetic engine answers any model name
        for name, settings in PATHS.items():
            progress(f"accounting: {name}: {STREAMS} streams x {EVENTS} events")
            rows.append(_measure(name, settings, server, model))
    plain = rows[0]
    for row in rows:
        row["cpu_ratio_to_plain"] = (row["envoy_cpu_us_per_event"] + (row["processor_cpu_us_per_event"] or 0.0)) \
            / max(1e-9, plain["envoy_cpu_us_per_event"])
    return {"streams": STREAMS, "events_per_stream": EVENTS, "tokens_per_s": RATE, "rows": rows}


def markdown_lines(result: Mapping[str, Any]) -> list[str]:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.2f}"
    lines = [f"## Token accounting in Envoy 1.40: the cost per event ({result['streams']} streams x "
             f"{result['events_per_stream']} events at {result['tokens_per_s']:g} tok/s, each event split "
             "across two chunks)", "",
             "| path | Envoy CPU us/event | processor CPU us/event | CPU / plain | hop p50 / p99 (ms) | "
             "TTFT p50 (ms) | count = usage |", "|---|---:|---:|---:|---:|---:|---|"]
    for row in result["rows"]:
        processor = row["processor_cpu_us_per_event"]
        right = {True: "yes", False: "no", None: "-"}[row["counted_right"]]
        lines.append(f"| {row['path']} | {row['envoy_cpu_us_per_event']:.1f} | "
                     f"{'-' if processor is None else f'{processor:.1f}'} | {row['cpu_ratio_to_plain']:.2f}x | "
                     f"{ms(row['hop_p50_s'])} / {ms(row['hop_p99_s'])} | {ms(row['ttft_p50_s'])} | {right} |")
    return [*lines, ""]


if __name__ == "__main__":
    import json
    out = bench_accounting(lambda line: print(line, flush=True))
    print(json.dumps(out, indent=2))
    print("\n".join(markdown_lines(out)))
