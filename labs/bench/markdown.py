"""bench.md: every part's results as the tables docs/benchmarks.md quotes."""
from __future__ import annotations

from functools import partial
from typing import Any, Mapping

from labs.bench import accounting, admission, apis, prefill
from labs.bench.proxies import PROXIES
from labs.bench.verdicts import ratio_cell
from labs.client.durations import milliseconds


# A cell of a table whose column header names the unit.
_ms_cell = partial(milliseconds, digits=2, unit=False)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _ok(flag: bool | None) -> str:
    return "yes" if flag else "**no**"


def _table(title: str, header: str, rows: list[str]) -> list[str]:
    """A section: its title, then a table whose first column is text and the rest numbers."""
    columns = header.count("|") - 1
    return [f"## {title}", "", header, "| --- |" + " ---: |" * (columns - 1), *rows, ""]


def markdown(results: Mapping[str, Any], command: str) -> str:
    lines = ["# Benchmarks", "", f"Command: `{command}` (this 2-core machine, shared).", ""]
    burst = results.get("admission")
    if burst and "configs" in burst:
        lines += admission.markdown_lines(burst)
    if results.get("prefill") and "median" in results["prefill"]:
        lines += prefill.markdown_lines(results["prefill"])
    proxies = results.get("proxies")
    if proxies and "comparison" in proxies:
        n = proxies["streams"]
        cmp, many, one = proxies["comparison"], proxies["many_streams"], proxies["one_stream"]
        lines += [f"## Fixed proxy configs against direct (1 stream, and {n:,} streams x 20 tok/s "
                  f"for {proxies['duration_s']:g} s)", "",
                  "| path | TTFT p50 1 stream (ms) | added | TTFT p99 ratio | hop p50/p99 1 stream (ms) "
                  f"| {n:,}: complete | tok/s % ideal | TTFT p50/p99 (ms) | gap p99 (steady) (ms) | gap p99 ratio "
                  "| hop p99 (ms) | proxy CPU | targets |",
                  "| --- |" + " ---: |" * 12 + " --- |"]
        for name in ("direct", *PROXIES):
            o, m, c = one[name], many[name], cmp.get(name, {})
            targets = c.get("targets")
            verdict = "-" if not targets else ", ".join(
                f"{k}: {_ok(v)}" for k, v in targets.items())
            added = "-" if name == "direct" else f"{_ms_cell(c.get('one_ttft_added_p50_s'), digits=3)}"
            lines.append(
                f"| {name} | {_ms_cell(o['ttft_p50_s'])} | {added} | "
                f"{'-' if name == 'direct' else _x(c.get('one_ttft_p99_ratio'))} | "
                f"{_ms_cell(o['hop_p50_s'])} / {_ms_cell(o['hop_p99_s'])} | "
                f"{m['completed']:,} | {m['rate_pct']:.0f}% | "
                f"{_ms_cell(m['ttft_p50_s'], digits=0)} / {_ms_cell(m['ttft_p99_s'], digits=0)} | "
                f"{_ms_cell(m['gap_p99_s'], digits=1)} ({_ms_cell(m.get('steady_gap_p99_s'), digits=1)}) | "
                f"{'-' if name == 'direct' else _x(c.get('many_gap_p99_ratio'))} | "
                f"{_ms_cell(m['hop_p99_s'], digits=1)} | "
                f"{'-' if not m.get('proxy') else str(round(m['proxy']['cpu_pct'])) + '%'} | {verdict} |")
        lines += ["", "CPU at the many-streams step, % of one core (server / proxy / client / whole machine):", ""]
        for name in ("direct", *PROXIES):
            m = many[name]
            lines.append(f"- {name}: {m['server']['cpu_pct']:.0f}% / "
                         f"{(m.get('proxy') or {}).get('cpu_pct', '-')}{'%' if m.get('proxy') else ''} / "
                         f"{m['client_cpu_pct']:.0f}% / {m['machine_busy_pct']:.0f}%; server "
                         f"{m['server']['cpu_s'] / max(1, m['server_tokens']) * 1e6:.0f} us/token, "
                         f"client {m['client_cpu_per_event_us'] or 0:.0f} us/event")
        lines.append("")
    cpu = results.get("server-cpu")
    if cpu:
        lines += _table(
            "Server CPU per token, without and with write coalescing",
            "| streams x tok/s | coalesce | server CPU us/token | writes/token | gap p50/p99 (ms) |",
            [f"| {r['streams']} x {r['tokens_per_s_per_stream']:g} | {r['coalesce_ms']:g} ms | "
             f"{r['server_cpu_us_per_token']:.1f} | {r['writes_per_token']:.2f} | "
             f"{_ms_cell(r['gap_p50_s'], digits=1)} / {_ms_cell(r['gap_p99_s'], digits=1)} |" for r in cpu["rows"]])
        if cpu.get("many"):
            lines += _table(
                f"Server CPU per token at 1,000 streams x 20 tok/s, no coalescing, beside the "
                f"reference servers (target: at most {cpu['target_ratio']:g}x the raw ASGI app on the "
                f"same stack)",
                "| server | tokens | server CPU us/token | / raw ASGI | gap p99 (ms) | failed | target |",
                [f"| {r['server']} | {r['tokens']:,} | {r['server_cpu_us_per_token']:.1f} | "
                 f"{_x(r.get('ratio_to_raw'))} | "
                 f"{_ms_cell(r['gap_p99_s'], digits=1)} | {r['failed']} | {ratio_cell(r, cpu['target_ratio'])} |"
                 for r in cpu["many"]])
            if cpu.get("reason"):
                lines += [f"Why the target is missed here (measured in this run): {cpu['reason']}", ""]
    if (results.get("apis") or {}).get("apis"):
        lines += apis.markdown_lines(results["apis"])
    if (results.get("accounting") or {}).get("rows"):
        lines += accounting.markdown_lines(results["accounting"])
    server = results.get("server")
    if server is not None:
        lines += ["## Framing and the whole server path (`python -m server.tools.bench`)", ""]
        if "result" in server:
            res = server["result"]
            framing, path = res.get("framing", {}), res.get("stream_path", {})
            lines.append(f"- framing (prebuilt template): {framing.get('template_us_per_frame', 0):.2f} us/frame "
                         f"(json.dumps: {framing.get('json_dumps_us_per_frame', 0):.2f})")
            if path:
                lines.append(f"- stream path, no socket: {path.get('stream_path_us_per_token', 0):.2f} us/token")
            for key, r in res.items():
                if key.startswith("whole_path") and isinstance(r, dict):
                    lines.append(f"- {key}: {r.get('server_cpu_us_per_token', 0):.1f} us server CPU/token, "
                                 f"{r.get('writes_per_token', 0):.2f} writes/token, {r.get('tokens_per_s', 0):,.0f} tok/s")
        else:
            lines.append(f"- not measured: {server.get('missing') or server.get('error')}")
        lines.append("")
    engine = results.get("engine")
    if engine is not None:
        lines += ["## Engine (`python -m server.tools.engine_bench`, tiny model, CPU)", ""]
        if "result" in engine:
            for run in engine["result"].get("runs", []):
                lines.append(f"- batch {run['batch']}: {run['tokens_per_s']:,.0f} tok/s, step "
                             f"{run['step_ms_median']} ms median ({run['step_ms_p99']} p99)")
        else:
            lines.append(f"- not measured: {engine.get('missing') or engine.get('error')}")
        lines.append("")
    cl = results.get("client")
    if cl:
        lines += _table(
            "The measuring client (against a bare asyncio SSE server)",
            "| loop | streams | events/s | client CPU us/event | client CPU | hop p50/p99 (ms) |",
            [f"| {r['loop']} | {r['streams']} | {r['events_per_s']:,} | "
             f"{r['client_cpu_us_per_event']:.1f} | {r['client_cpu_pct']:.0f}% | "
             f"{_ms_cell(r['hop_p50_s'], digits=3)} / {_ms_cell(r['hop_p99_s'], digits=3)} |" for r in cl["rows"]])
    # A part that failed has no table: it says so, never a report that reads as complete.
    for name, result in results.items():
        if isinstance(result, Mapping) and "error" in result and name not in ("server", "engine"):
            lines += [f"## {name}: not measured", "", f"The part failed: {result['error']}", ""]
    return "\n".join(lines)
