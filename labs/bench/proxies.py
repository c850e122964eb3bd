"""Part 1, `proxies`: each fixed proxy config (proxies/fixed/) against direct, in one run against
one server (`--engine synthetic`).

TTFT p50/p99 at one stream (many short requests, the paths interleaved so drift hits all alike),
gap p99 and hop delay (server stamp -> client) on one paced stream, then N streams at once
(default 1,000) at 20 tok/s, as the load lab runs them. Targets: +< 1 ms TTFT p50 at one stream;
gap p99 within 1.2x of direct, no failure and >= 90% of the ideal aggregate rate at 1,000 streams.
"""
from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Mapping

from labs import client
from labs.client.driver import no_gc_pauses, uvloop_runner
from labs.load import SYNTHETIC, LoadLab, LoadPath, StepResult, script
from labs.client.results import percentile

PROXIES = ("nginx", "haproxy", "envoy")
TARGET_TTFT_ADDED_S = 0.001
TARGET_GAP_RATIO = 1.2
TARGET_RATE_PCT = 90.0
PACED_TOKENS, PACED_RATE = 40, 20.0  # the one paced stream per path: 2 s
Progress = Callable[[str], None]


def path_to(proxy: str | None) -> LoadPath:
    """The fixed config of `proxy` as a load-lab path; None: direct to the server."""
    return LoadPath(proxy or "direct", "fixed" if proxy else "direct",
                    f"proxies/fixed ({proxy})" if proxy else "direct", proxy=proxy)


def _body(model: str, tokens: int, rate: float | None) -> dict[str, Any]:
    lab: dict[str, Any] = {"stamp": True, "script": script(tokens)}  # one token, one event
    if rate:
        lab["tokens_per_s"] = rate
    return {"model": model, "messages": [{"role": "user", "content": "Tell me something."}],
            "stream": True, "max_tokens": tokens, "lab": lab}


async def _single(urls: Mapping[str, str], model: str, rounds: int) -> dict[str, dict[str, Any]]:
    """One stream at a time, the paths interleaved: TTFT from many short requests, then gaps
    and hop delay from one paced 40-token stream per path."""
    ttfts: dict[str, list[float]] = {name: [] for name in urls}
    short = json.dumps(_body(model, 3, None)).encode()
    for name, url in urls.items():  # warm every path once (connections, first-request code)
        await client.measure_stream(url, short)
    for _ in range(rounds):
        for name, url in urls.items():
            r = await client.measure_stream(url, short)
            if r.ttft_s is not None:
                ttfts[name].append(r.ttft_s)
    paced = json.dumps(_body(model, PACED_TOKENS, PACED_RATE)).encode()
    out: dict[str, dict[str, Any]] = {}
    for name, url in urls.items():
        r = await client.measure_stream(url, paced)
        hops = r.hop_delays
        out[name] = {"requests": len(ttfts[name]), "ttft_p50_s": percentile(ttfts[name], 50),
                     "ttft_p99_s": percentile(ttfts[name], 99), "gap_p99_s": percentile(r.gaps, 99),
                     "hop_p50_s": percentile(hops, 50), "hop_p99_s": percentile(hops, 99),
                     "paced_outcome": r.outcome}
    return out


def bench_proxies(streams: int, duration_s: float, rounds: int, progress: Progress) -> dict[str, Any]:
    result: dict[str, Any] = {"streams": streams, "duration_s": duration_s, "tokens_per_s": 20.0}
    with LoadLab(duration_s=duration_s, progress=progress) as lab, contextlib.ExitStack() as stack:
        server = lab.server(SYNTHETIC)
        proxies = {p: stack.enter_context(lab.proxy(path_to(p), server.port)) for p in PROXIES}
        urls = {"direct": server.url + "/v1/chat/completions",
                **{p: proxy.url + "/v1/chat/completions" for p, proxy in proxies.items()}}
        progress(f"one stream at a time, {rounds} rounds over {len(urls)} paths")
        with uvloop_runner() as runner, no_gc_pauses():
            result["one_stream"] = runner.run(_single(urls, lab.model, rounds))
        steps: dict[str, StepResult] = {}
        for name in ("direct", *PROXIES):
            progress(f"{streams} streams: {name}")
            steps[name] = lab.run_step(path_to(None if name == "direct" else name), streams, server,
                                       proxies.get(name))
        result["many_streams"] = {name: step.to_dict() for name, step in steps.items()}
    result["comparison"] = compare(result["one_stream"], result["many_streams"])
    return result


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def compare(one: Mapping[str, Mapping[str, Any]], many: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each proxy against direct, and whether the targets hold."""
    d1, dn = one["direct"], many["direct"]
    rows: dict[str, Any] = {}
    for name in (n for n in one if n != "direct"):
        p1, pn = one[name], many.get(name, {})
        added = None if p1["ttft_p50_s"] is None or d1["ttft_p50_s"] is None else p1["ttft_p50_s"] - d1["ttft_p50_s"]
        gap_ratio = _ratio(pn.get("gap_p99_s"), dn.get("gap_p99_s"))
        rows[name] = {
            "one_ttft_added_p50_s": added,
            "one_ttft_p50_ratio": _ratio(p1["ttft_p50_s"], d1["ttft_p50_s"]),
            "one_ttft_p99_ratio": _ratio(p1["ttft_p99_s"], d1["ttft_p99_s"]),
            "one_gap_p99_ratio": _ratio(p1["gap_p99_s"], d1["gap_p99_s"]),
            "one_hop_p50_s": p1["hop_p50_s"], "one_hop_p99_s": p1["hop_p99_s"],
            "many_ttft_p50_ratio": _ratio(pn.get("ttft_p50_s"), dn.get("ttft_p50_s")),
            "many_ttft_p99_ratio": _ratio(pn.get("ttft_p99_s"), dn.get("ttft_p99_s")),
            "many_gap_p99_ratio": gap_ratio,
            "many_steady_gap_p99_ratio": _ratio(pn.get("steady_gap_p99_s"), dn.get("steady_gap_p99_s")),
            "many_hop_p50_s": pn.get("hop_p50_s"), "many_hop_p99_s": pn.get("hop_p99_s"),
            "many_failed": pn.get("failed"), "many_rate_pct": pn.get("rate_pct"),
            "many_proxy_cpu_pct": (pn.get("proxy") or {}).get("cpu_pct"),
            "targets": {
                "ttft_added_under_1ms": added is not None and added < TARGET_TTFT_ADDED_S,
                "gap_p99_within_1.2x": gap_ratio is not None and gap_ratio <= TARGET_GAP_RATIO,
                "no_failure": pn.get("failed") == 0,
                "rate_90pct": (pn.get("rate_pct") or 0.0) >= TARGET_RATE_PCT,
            },
        }
    rows["direct"] = {"many_failed": dn.get("failed"), "many_rate_pct": dn.get("rate_pct"),
                      "one_hop_p50_s": d1["hop_p50_s"], "one_hop_p99_s": d1["hop_p99_s"],
                      "many_hop_p50_s": dn.get("hop_p50_s"), "many_hop_p99_s": dn.get("hop_p99_s")}
    return rows
