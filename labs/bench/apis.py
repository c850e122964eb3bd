"""Part `apis`: what each wire protocol costs the server (issue 43), every protocol of
`server.apis.table.APIS` (chat, responses, messages) on the same server in one run.

Per protocol:

* server CPU per token at STREAMS streams x 20 tok/s, no coalescing, as a ratio to chat's and
  to the raw ASGI app's given the same streams in this part (labs/bench/stack_floors.py: the
  floor the server-cpu part reads its target against);
* server CPU per request for ARRIVALS simultaneous arrivals of 3 tokens (as the admission part:
  accept, parse, validation, admission, the lifecycle events, the first text delta, the end),
  with TTFT p50/p99 at the first text delta (never a lifecycle event: docs/metrics.md); the
  median of ROUNDS bursts, the protocols interleaved (one burst each moved a protocol's figure
  by 2.3x between two runs here: 430 and 980 us);
* the bytes on the wire, from two single streams of different lengths: per token (the
  difference) and per request (the rest: the lifecycle events).

Only the framing differs between the protocols: the same engine, admission and one write per
token. A Responses delta carries its item id, indexes and a `sequence_number`, and its lifecycle
events each carry the whole response object (`response.completed` the whole text again); a
Messages delta is the smallest. Target: each protocol's CPU per token at most 1.25x chat's
(framing is a few us of a token's ~30: docs/benchmarks.md); per request, no target (the
lifecycle events are the protocol's own, not a cost to cut). Without chat's figure the verdict
is "skipped", never a pass.
"""
from __future__ import annotations

import os
import statistics
from typing import Any

from labs.bench import references
from labs.bench.admission import BURST_TOKENS_S, burst_path
from labs.bench.proxies import Progress, path_to
from labs.bench.verdicts import at_most, ratio_cell
from labs.client.apis import DEFAULT_API
from labs.client.durations import milliseconds
from labs.load import SYNTHETIC, LoadLab, StepResult
from server.apis.table import APIS

STREAMS, RATE, DURATION_S = 300, 20.0, 4.0  # 24,000 tokens per protocol: CPU ticks are 10 ms
ARRIVALS, ROUNDS = 500, 3
TARGET_RATIO_TO_CHAT = 1.25
# The two single streams whose difference is the bytes one more token costs (paced fast: 0.1 s).
BYTES_SHORT, BYTES_LONG, BYTES_RATE = 10, 50, 500.0


def bench_apis(progress: Progress, streams: int = STREAMS, arrivals: int = ARRIVALS,
               duration_s: float = DURATION_S) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    with LoadLab(duration_s=duration_s, tokens_per_s=RATE, progress=progress) as lab:
        server = lab.server(SYNTHETIC)
        for name, api in APIS.items():
            progress(f"apis: {name}: {streams} streams x {RATE:g} tok/s")
            many = lab.run_step(path_to(None), streams, server, None, {"coalesce_ms": 0.0}, api=name)
            rows[name] = {"title": api.title, "path": api.path, **per_token(many),
                          **wire_bytes(lab, server.url, name)}
        bursts: dict[str, list[StepResult]] = {name: [] for name in APIS}
        for round_ in range(ROUNDS):
            for name in APIS:
                progress(f"apis: {name}: {arrivals} arrivals, round {round_ + 1}/{ROUNDS}")
                bursts[name].append(lab.run_step(burst_path(None), arrivals, server, None, api=name))
        for name, steps in bursts.items():
            rows[name].update(per_request(steps, arrivals))
        tokens = max(2, round(duration_s * RATE))
        floor_body = lab.body(path_to(None), tokens)
        burst_body = lab.body(burst_path(None), max(2, round(BURST_TOKENS_S * RATE)))
        with references.module_server("raw-asgi", "labs.bench.stack_floors", "--stack", "uvicorn") as (url, pid):
            progress(f"apis: {streams} streams, reference: {references.RAW_ASGI}")
            floor = references.measure(url, pid, references.reference_body(references.RAW_ASGI, floor_body),
                                       streams, 3 * duration_s + 15.0)
            floor_bursts = []
            for round_ in range(ROUNDS):
                progress(f"apis: {arrivals} arrivals, reference: {references.RAW_ASGI}, round {round_ + 1}/{ROUNDS}")
                floor_bursts.append(references.measure(
                    url, pid, references.reference_body(references.RAW_ASGI, burst_body), arrivals, 30.0))
    result = {"streams": streams, "arrivals": arrivals, "tokens_per_s": RATE, "duration_s": duration_s,
              "apis": rows, "target_ratio": TARGET_RATIO_TO_CHAT, "load_average_1m": os.getloadavg()[0],
              "floor": {"server": references.RAW_ASGI, "tokens": floor["events"],
                        "server_cpu_us_per_token": floor["server_cpu_s"] / max(1, floor["events"]) * 1e6,
                        "server_cpu_us_per_request": statistics.median(
                            b["server_cpu_s"] for b in floor_bursts) / arrivals * 1e6,
                        "failed": floor["failed"] + sum(b["failed"] for b in floor_bursts)}}
    judge(result)
    return result


def per_token(step: StepResult) -> dict[str, Any]:
    tokens = max(1, step.server_tokens)
    return {"tokens": step.server_tokens, "server_cpu_us_per_token": step.server["cpu_s"] / tokens * 1e6,
            "writes_per_token": step.server_writes / tokens, "gap_p99_s": step.gap_p99_s,
            "failed": step.failed}


def per_request(steps: list[StepResult], arrivals: int) -> dict[str, Any]:
    """The bursts' medians: CPU per request, TTFT p50 and p99; every round's CPU; failures summed."""
    def median(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None
    each = [step.server["cpu_s"] / arrivals * 1e6 for step in steps]
    return {"server_cpu_us_per_request": median(each), "server_cpu_us_per_request_each": each,
            "ttft_p50_s": median([s.ttft_p50_s for s in steps]),
            "ttft_p99_s": median([s.ttft_p99_s for s in steps]), "burst_failed": sum(s.failed for s in steps)}


def wire_bytes(lab: LoadLab, url: str, api: str) -> dict[str, Any]:
    """Body bytes of one stream of BYTES_SHORT and one of BYTES_LONG tokens: per token and the rest."""
    from labs.client import measure_stream
    from labs.client.driver import uvloop_runner

    sizes = []
    with uvloop_runner() as runner:
        for tokens in (BYTES_SHORT, BYTES_LONG):
            body = lab.body(path_to(None), tokens, {"tokens_per_s": BYTES_RATE, "stamp": False}, api)
            result = runner.run(measure_stream(url + APIS[api].path, body, api=api, total_timeout_s=30.0))
            if result.outcome != "complete":
                return {"bytes_per_token": None, "bytes_per_request": None}
            sizes.append(result.body_bytes)
    per = (sizes[1] - sizes[0]) / (BYTES_LONG - BYTES_SHORT)
    return {"bytes_per_token": per, "bytes_per_request": sizes[0] - per * BYTES_SHORT}


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def judge(result: dict[str, Any]) -> None:
    """Each protocol's ratios to chat's and to the floor's; each non-chat protocol's verdict
    (None: skipped, with why)."""
    rows, floor = result["apis"], result["floor"]
    chat = rows.get(DEFAULT_API) or {}
    chat_usable = bool(chat.get("tokens")) and not chat.get("failed")
    floor_usable = bool(floor.get("tokens")) and not floor.get("failed")
    for name, row in rows.items():
        row["ratio_to_chat"] = _ratio(row["server_cpu_us_per_token"],
                                      chat.get("server_cpu_us_per_token") if chat_usable else None)
        row["request_ratio_to_chat"] = _ratio(row["server_cpu_us_per_request"], chat.get("server_cpu_us_per_request"))
        row["ratio_to_raw"] = _ratio(row["server_cpu_us_per_token"],
                                     floor["server_cpu_us_per_token"] if floor_usable else None)
        row["request_ratio_to_raw"] = _ratio(row["server_cpu_us_per_request"],
                                             floor["server_cpu_us_per_request"] if floor_usable else None)
        if name == DEFAULT_API:
            continue
        if row["ratio_to_chat"] is None:
            row["target_met"] = None
            row["skipped"] = "chat gave no usable figure in this run"
        else:
            row["target_met"] = at_most(row["ratio_to_chat"], result["target_ratio"]) and not row["failed"]


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown_lines(result: dict[str, Any]) -> list[str]:
    n, arrivals, floor = result["streams"], result["arrivals"], result["floor"]
    lines = [f"## What a protocol costs: server CPU per token at {n:,} streams x {result['tokens_per_s']:g} "
             f"tok/s, per request at {arrivals:,} arrivals (median of {ROUNDS} bursts; target: CPU per token at most "
             f"{result['target_ratio']:g}x chat's)", "",
             "| api | path | server CPU us/token | / chat | / raw ASGI | writes/token | bytes/token "
             "| bytes/request | gap p99 (ms) | server CPU us/request | / chat | / raw ASGI "
             "| TTFT p50/p99 (ms) | failed | target |",
             "| --- | --- |" + " ---: |" * 12 + " --- |"]
    for name, row in result["apis"].items():
        failed = row["failed"] + row["burst_failed"]
        lines.append(
            f"| {name} | `{row['path']}` | {row['server_cpu_us_per_token']:.1f} | {_x(row['ratio_to_chat'])} | "
            f"{_x(row['ratio_to_raw'])} | {row['writes_per_token']:.2f} | {_number(row['bytes_per_token'])} | "
            f"{_number(row['bytes_per_request'])} | {milliseconds(row['gap_p99_s'], digits=1, unit=False)} | "
            f"{row['server_cpu_us_per_request']:.0f} | {_x(row['request_ratio_to_chat'])} | "
            f"{_x(row['request_ratio_to_raw'])} | {milliseconds(row['ttft_p50_s'], digits=0, unit=False)} / "
            f"{milliseconds(row['ttft_p99_s'], digits=0, unit=False)} | {failed} | "
            f"{ratio_cell(row, result['target_ratio'], ' chat')} |")
    lines += ["", f"The floor, {floor['server']} given the same streams in the same part: "
              f"{floor['server_cpu_us_per_token']:.1f} us/token, {floor['server_cpu_us_per_request']:.0f} "
              f"us/request ({floor['failed']} failed).", ""]
    return lines
