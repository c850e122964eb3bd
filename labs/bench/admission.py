"""Part `admission`: 1,000 requests arriving in the same instant, TTFT p50/p99, on the synthetic
engine, direct and through each fixed proxy config, with one server process and with
`--workers 2`, in one run.

Each burst opens every stream at once (3 tokens at 20 tok/s: the first token is due at once,
so TTFT is admission: accept, HTTP parse, JSON, validation, template, tokenization, the slot,
the headers and the first frames). Rounds interleave the paths so that the machine's noise hits
all of them alike; the verdict reads the median of the rounds' p99, and the table shows every
round's. Server CPU per admitted request is the server's whole process tree (every worker).
In the same rounds, the same burst goes to the reference servers (labs/bench/references.py: a
plain FastAPI endpoint with no engine, a raw ASGI app on the lab's own uvicorn, httptools and
uvloop, a bare asyncio server with no framework, a protocol straight on httptools): what this
machine, its load, the client and the HTTP stack allow before any lab feature.

Target (issue 27), read against the references of the same rounds, never an absolute figure on
a shared machine: one server process, straight to it (`--workers 1`, direct), reaches a TTFT p99
at most 1.5x the bare asyncio server's and below the plain FastAPI endpoint's. The other rows
(`--workers 2`, the fixed proxy configs) show their ratio to the bare server, without a target.
A miss comes with its measured reason (`reasons`): the server's CPU per request against the bare
server's (a burst is admitted by one event loop: the last arrival waits for all the others'
work), the client's CPU on the same cores, the machine's load, and what the raw ASGI app on the
same HTTP stack reached (the part of the miss that is the stack's own). Without the references' p99
the verdict is "skipped", never a pass.
"""
from __future__ import annotations

import contextlib
import os
import statistics
from typing import Any

from labs.bench import references
from labs.bench.proxies import PROXIES, Progress, path_to
from labs.load import LoadLab, LoadPath, ServerSpec

ARRIVALS = 1000
ROUNDS = 3
BURST_TOKENS_S = 0.15  # 3 tokens at 20 tok/s per stream
WORKERS = (1, 2)
TARGET_RATIO = 1.5  # TTFT p99 of --workers 1, direct / the bare asyncio server's, same rounds
TARGET_ROW = ("workers=1", "direct")


def _burst_path(proxy: str | None) -> LoadPath:
    base = path_to(proxy)
    return LoadPath(base.name, base.role, base.limit, proxy=proxy, duration_s=BURST_TOKENS_S)


def bench_admission(progress: Progress, arrivals: int = ARRIVALS, rounds: int = ROUNDS) -> dict[str, Any]:
    configs: dict[str, Any] = {}
    refs: dict[str, list[dict[str, Any]]] = {}
    load = [os.getloadavg()[0]]
    for workers in WORKERS:
        spec = ServerSpec(workers=workers)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in ("direct", *PROXIES)}
        with LoadLab(progress=progress) as lab, contextlib.ExitStack() as stack:
            server = lab.server(spec)
            proxies = {p: stack.enter_context(lab.proxy(path_to(p), server.port)) for p in PROXIES}
            # The references share the first server's rounds (same minutes, same noise).
            servers = stack.enter_context(references.references()) if workers == WORKERS[0] else {}
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
                        "client_cpu_ms": step.client_cpu_s * 1e3,
                        "machine_busy_pct": step.machine_busy_pct,
                        "tcp_counters": step.tcp_counters})
                body = lab.body(_burst_path(None), max(2, round(BURST_TOKENS_S * lab.tokens_per_s)))
                for name, (url, pid) in servers.items():
                    progress(f"admission: {arrivals} arrivals, reference: {name}, round {round_ + 1}/{rounds}")
                    measured = references.measure(url, pid, references.reference_body(name, body),
                                                  arrivals, 30.0)
                    refs.setdefault(name, []).append({**measured, "client_cpu_ms": measured["client_cpu_s"] * 1e3,
                                       "server_cpu_us_per_request": measured["server_cpu_s"] / arrivals * 1e6})
        configs[f"workers={workers}"] = {name: summarize(name, runs) for name, runs in rows.items()}
        load.append(os.getloadavg()[0])
    result = {"arrivals": arrivals, "rounds": rounds, "configs": configs,
              "references": {name: summarize_reference(runs) for name, runs in refs.items() if runs},
              "load_average_1m": load, "cores": os.cpu_count(), "target_ratio": TARGET_RATIO}
    judge(result)
    result["reasons"] = reasons(result)
    return result


def judge(result: dict[str, Any]) -> None:
    """Each row's ratio to the bare server's p99; the target row's verdict: True, False, or None
    (skipped: a reference did not give a p99, so there is nothing to compare against)."""
    refs = result.get("references") or {}
    bare = (refs.get(references.BARE) or {}).get("ttft_p99_median_s")
    plain = (refs.get(references.PLAIN) or {}).get("ttft_p99_median_s")
    for ref in refs.values():
        p99 = ref.get("ttft_p99_median_s")
        ref["ratio_to_bare"] = p99 / bare if p99 is not None and bare else None
    for config, paths in result["configs"].items():
        for name, row in paths.items():
            p99 = row["ttft_p99_median_s"]
            row["ratio_to_bare"] = p99 / bare if p99 is not None and bare else None
            row["ratio_to_plain"] = p99 / plain if p99 is not None and plain else None
            if (config, name) != TARGET_ROW:
                row["met"] = "-"
            elif row["ratio_to_bare"] is None or row["ratio_to_plain"] is None:
                row["met"] = None
                row["skipped"] = ("a reference server gave no TTFT p99 in this run"
                                  if p99 is not None else "the lab's server gave no TTFT p99")
            else:
                row["met"] = (row["ratio_to_bare"] <= TARGET_RATIO and row["ratio_to_plain"] < 1.0
                              and not row["failed"])


def summarize_reference(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(values) if values else None
    return {"runs": runs, "ttft_p50_median_s": median("ttft_p50_s"),
            "ttft_p99_median_s": median("ttft_p99_s"), "failed": sum(r["failed"] or 0 for r in runs),
            "server_cpu_us_per_request": median("server_cpu_us_per_request"),
            "client_cpu_ms": median("client_cpu_ms")}


def reasons(result: dict[str, Any]) -> list[str]:
    """Why the missed targets are missed, from the run's own figures: first what the machine,
    the client and the references showed, then one line per missed target (none when all are
    met). A burst is admitted by one event loop per worker: the last arrival waits for the
    others' work, so p99 cannot be below the server's CPU for the burst spread over its cores."""
    n, cores = result["arrivals"], result.get("cores") or 1
    missed = [(config, name, row) for config, paths in result["configs"].items()
              for name, row in paths.items() if row.get("met") is False]
    if not missed:
        return []
    runs = [r for _, _, row in missed for r in row["runs"]]
    client = [r.get("client_cpu_ms") or 0.0 for r in runs]
    busy = [r.get("machine_busy_pct") or 0.0 for r in runs]
    load = result.get("load_average_1m") or []
    context = (f"This machine: {cores} cores, {min(busy):.0f}-{max(busy):.0f}% busy during the "
               f"bursts (% of one core, every process on it), load average "
               f"{' -> '.join(f'{v:.1f}' for v in load)}; the measuring client used "
               f"{min(client):.0f}-{max(client):.0f} ms of CPU per burst on the same cores")
    refs = result.get("references") or {}
    if refs:
        context += "; in the same rounds " + ", ".join(
            f"{name} reached p99 {ref['ttft_p99_median_s'] * 1e3:,.0f} ms with "
            f"{ref['server_cpu_us_per_request']:.0f} us of CPU per request"
            for name, ref in refs.items() if ref.get("ttft_p99_median_s") is not None)
    out = [context + "."]
    bare = (refs.get(references.BARE) or {})
    bare_cpu = bare.get("server_cpu_us_per_request") or 0.0
    for config, name, row in missed:
        cpu_ms = row["server_cpu_us_per_request"] * n / 1e3
        line = (f"{config.replace('workers=', '--workers ')} {name}: p99 "
                f"{row['ttft_p99_median_s'] * 1e3:,.0f} ms, {row['ratio_to_bare']:.2f}x the bare "
                f"asyncio server's (target at most {TARGET_RATIO:g}x) and "
                f"{row['ratio_to_plain']:.2f}x plain FastAPI's (target below 1x)")
        if row["failed"]:
            line += f"; {row['failed']} of the streams failed"
        if bare_cpu:
            line += (f"; {row['server_cpu_us_per_request']:.0f} us of server CPU per request is "
                     f"{row['server_cpu_us_per_request'] / bare_cpu:.1f}x the bare server's "
                     f"{bare_cpu:.0f} us, {cpu_ms:,.0f} ms of one core for {n:,} arrivals, which "
                     f"the last arrival waits for")
        line += _above_the_stack(row, refs.get(references.RAW_ASGI) or {})
        out.append(line + ".")
    return out


def _above_the_stack(row: dict[str, Any], raw: dict[str, Any]) -> str:
    """What the raw ASGI app on the same HTTP stack reached: the part of the miss that is the
    stack's own, and the lab server's work above it."""
    ratio, cpu = raw.get("ratio_to_bare"), raw.get("server_cpu_us_per_request")
    if ratio is None or not cpu:
        return ""
    return (f"; an ASGI app that does nothing but stream, on the same uvicorn, httptools and "
            f"uvloop, reached {ratio:.2f}x with {cpu:.0f} us per request: the lab server's own "
            f"work above its HTTP stack is {row['server_cpu_us_per_request'] - cpu:.0f} us per "
            f"request")


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    p99s = [r["ttft_p99_s"] for r in runs if r["ttft_p99_s"] is not None]
    p50s = [r["ttft_p50_s"] for r in runs if r["ttft_p50_s"] is not None]
    median_p99 = statistics.median(p99s) if p99s else None
    return {"runs": runs, "ttft_p50_median_s": statistics.median(p50s) if p50s else None,
            "ttft_p99_median_s": median_p99, "failed": sum(r["failed"] or 0 for r in runs),
            "server_cpu_us_per_request": statistics.median(r["server_cpu_us_per_request"] for r in runs)}


def markdown_lines(result: dict[str, Any]) -> list[str]:
    n, rounds = result["arrivals"], result["rounds"]
    lines = [f"## Admission: {n:,} simultaneous arrivals (synthetic engine, {rounds} rounds)", "",
             "| server | path | TTFT p50 (ms) | TTFT p99 median (ms) | p99 each round (ms) "
             "| server CPU us/request | failed | p99 / bare asyncio | target |",
             "| --- | --- |" + " ---: |" * 6 + " --- |"]
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
                f"{_ratio(row.get('ratio_to_bare'))} | {verdict(row)} |")
    for name, ref in (result.get("references") or {}).items():
        each = " / ".join("-" if r["ttft_p99_s"] is None else f"{r['ttft_p99_s'] * 1e3:.0f}"
                          for r in ref["runs"])
        p50, p99 = ref["ttft_p50_median_s"], ref["ttft_p99_median_s"]
        lines.append(f"| reference | {name} | {'-' if p50 is None else f'{p50 * 1e3:.0f}'} | "
                     f"{'-' if p99 is None else f'{p99 * 1e3:.0f}'} | {each} | "
                     f"{ref['server_cpu_us_per_request']:.0f} | {ref['failed']} | "
                     f"{_ratio(ref.get('ratio_to_bare'))} | - |")
    why = reasons(result)
    if why:
        lines += ["", "Why the target is missed here (measured in this run):", ""]
        lines += [f"- {reason}" for reason in why]
    return lines + [""]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def verdict(row: dict[str, Any]) -> str:
    """The target cell: pass or miss against the ratios, skipped with its reason, or no target."""
    met = row.get("met", "-")
    if met == "-":
        return "-"
    if met is None:
        return f"skipped: {row.get('skipped', 'no figure')}"
    head = f"<= {TARGET_RATIO:g}x bare, < plain FastAPI"
    return f"{head}: pass" if met else f"{head}: **miss** ({_ratio(row.get('ratio_to_plain'))} plain)"
