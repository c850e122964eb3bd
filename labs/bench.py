"""`python -m labs bench` (`make bench`): every benchmark of the project in one run.

    python -m labs bench                       # everything, ~3 minutes on 2 cores
    python -m labs bench --only proxies --streams 300

Writes reports/bench/<part>.json and reports/bench/bench.md (the README's table). Parts:

1. proxies: each fixed proxy config (proxies/fixed/) against direct, in one run against one
   server (`--engine synthetic`): TTFT p50/p99 at one stream (many short requests, the paths
   interleaved so drift hits all alike), gap p99 and hop delay (server stamp -> client) on one
   paced stream, then N streams at once (default 1,000) at 20 tok/s, as the load lab runs them.
   Targets: +< 1 ms TTFT p50 at one stream; gap p99 within 1.2x of direct, no failure and
   >= 90% of the ideal aggregate rate at 1,000 streams.
2. server-cpu: server CPU per token without and with write coalescing (`lab.coalesce_ms`), at a
   realistic per-stream rate (20 tok/s) and at a fast one (200 tok/s).
3. server: the framing benchmark `python -m server.bench` (another module's; recorded as
   missing if it is absent or fails).
4. engine: `python -m server.engine.bench` (tiny model tokens/s, batch 1 and the slot limit).
5. client: the measuring client's own cost: CPU per event, and the hop delay it measures against
   a bare asyncio SSE server (no framework): the floor under every hop-delay figure.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from labs import client
from labs.load import SYNTHETIC, LoadLab, LoadPath, StepResult, _no_gc_pauses, _runner, script
from labs.measurements import percentile
from labs.resources import raise_own_fd_limit

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "reports" / "bench"
PROXIES = ("nginx", "haproxy", "envoy")
PARTS = ("proxies", "server-cpu", "server", "engine", "client")
TARGET_TTFT_ADDED_S = 0.001
TARGET_GAP_RATIO = 1.2
TARGET_RATE_PCT = 90.0
Progress = Callable[[str], None]


def _path(proxy: str | None) -> LoadPath:
    return LoadPath(proxy or "direct", "fixed" if proxy else "direct",
                    f"proxies/fixed ({proxy})" if proxy else "direct", proxy=proxy)


# ---- 1. proxies against direct -----------------------------------------------------------------


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
    paced = json.dumps(_body(model, 40, 20.0)).encode()
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
        proxies = {p: stack.enter_context(lab.proxy(_path(p), server.port)) for p in PROXIES}
        urls = {"direct": server.url + "/v1/chat/completions",
                **{p: proxy.url + "/v1/chat/completions" for p, proxy in proxies.items()}}
        progress(f"one stream at a time, {rounds} rounds over {len(urls)} paths")
        with _runner() as runner, _no_gc_pauses():
            result["one_stream"] = runner.run(_single(urls, lab.model, rounds))
        steps: dict[str, StepResult] = {}
        for name in ("direct", *PROXIES):
            progress(f"{streams} streams: {name}")
            steps[name] = lab.run_step(_path(None if name == "direct" else name), streams, server,
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


# ---- 2. server CPU per token, with and without coalescing --------------------------------------

CPU_CASES = ((300, 20.0), (100, 200.0))  # (streams, tok/s per stream): same tokens/s order


def bench_server_cpu(duration_s: float, progress: Progress) -> dict[str, Any]:
    rows = []
    with LoadLab(duration_s=duration_s, progress=progress) as lab:
        server = lab.server(SYNTHETIC)
        for streams, rate in CPU_CASES:
            for coalesce in (0.0, 25.0):
                progress(f"server CPU: {streams} streams x {rate:g} tok/s, coalesce {coalesce:g} ms")
                lab.tokens_per_s = rate
                step = lab.run_step(_path(None), streams, server, None, {"coalesce_ms": coalesce})
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


# ---- 3 and 4. the server's own benchmarks, as subprocesses -------------------------------------


def _module_exists(name: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def run_module(module: str, out: Path, args: Sequence[str] = (), timeout_s: float = 300) -> dict[str, Any]:
    """`python -m MODULE --json OUT ARGS`, bounded; its JSON, or why there is none."""
    if not _module_exists(module):
        return {"missing": f"{module} does not exist in this checkout"}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", module, "--json", str(out), *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{module} ran past {timeout_s:.0f} s"}
    wall = time.monotonic() - started
    if done.returncode != 0 or not out.exists():
        return {"error": f"{module} exited {done.returncode}", "stderr": done.stderr[-2000:]}
    return {"wall_s": round(wall, 1), "stdout": done.stdout[-3000:], "result": json.loads(out.read_text())}


# ---- 5. the measuring client itself ------------------------------------------------------------


def _bare_sse_server(sock: socket.socket) -> None:
    """A bare asyncio SSE server (child process): reads a request, answers with `n` chunked
    events `interval` apart, each stamped with the wall clock right before its write."""
    import asyncio

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        spec = json.loads(await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        for i in range(spec["n"]):
            if i:
                await asyncio.sleep(spec["interval"])
            frame = ('data: {"choices":[{"index":0,"delta":{"content":"t%d "}}],"sent_at":%.6f}\n\n'
                     % (i, time.time())).encode()
            writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock, backlog=4096)
        async with server:
            await server.serve_forever()

    try:
        import uvloop
        uvloop.run(main())
    except ImportError:  # pragma: no cover
        asyncio.run(main())


@contextlib.contextmanager
def bare_server() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    process = multiprocessing.get_context("fork").Process(target=_bare_sse_server, args=(sock,), daemon=True)
    process.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        process.terminate()
        process.join(5)
        sock.close()


def _client_case(url: str, streams: int, n: int, interval: float, loop: str) -> dict[str, Any]:
    body = {"n": n, "interval": interval}
    factory = None
    if loop == "uvloop":
        import uvloop
        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner, _no_gc_pauses():
        batch = runner.run(client.run_many(url, [body] * streams, streams, 60.0))
    hops = [h for r in batch.results for h in r.hop_delays]
    events = sum(len(r.events) for r in batch.results)
    return {"loop": loop, "streams": streams, "events_per_s": round(events / batch.wall_s),
            "complete": sum(r.outcome == "complete" for r in batch.results),
            "client_cpu_us_per_event": batch.client_cpu_s / events * 1e6 if events else None,
            "client_cpu_pct": 100 * batch.client_cpu_s / batch.wall_s,
            "hop_p50_s": percentile(hops, 50), "hop_p99_s": percentile(hops, 99)}


def bench_client(progress: Progress, streams: int = 300) -> dict[str, Any]:
    """The client against a bare server: what the client (and loopback) add by themselves."""
    rows = []
    with bare_server() as url:
        for loop in ("uvloop", "asyncio"):
            progress(f"client: 1 stream, {loop}")
            rows.append(_client_case(url, 1, 400, 0.005, loop))
            progress(f"client: {streams} streams x 20 events/s, {loop}")
            rows.append(_client_case(url, streams, 60, 0.05, loop))
    return {"rows": rows}


# ---- the Markdown ----------------------------------------------------------------------------


def _ms(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v * 1e3:.{digits}f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _ok(flag: bool | None) -> str:
    return "yes" if flag else "**no**"


def markdown(results: Mapping[str, Any], command: str) -> str:
    lines = ["# Benchmarks", "", f"Command: `{command}` (this 2-core machine, shared).", ""]
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
            added = "-" if name == "direct" else f"{_ms(c.get('one_ttft_added_p50_s'), 3)}"
            lines.append(
                f"| {name} | {_ms(o['ttft_p50_s'])} | {added} | "
                f"{'-' if name == 'direct' else _x(c.get('one_ttft_p99_ratio'))} | "
                f"{_ms(o['hop_p50_s'])} / {_ms(o['hop_p99_s'])} | {m['completed']:,} | {m['rate_pct']:.0f}% | "
                f"{_ms(m['ttft_p50_s'], 0)} / {_ms(m['ttft_p99_s'], 0)} | {_ms(m['gap_p99_s'], 1)} "
                f"({_ms(m.get('steady_gap_p99_s'), 1)}) | "
                f"{'-' if name == 'direct' else _x(c.get('many_gap_p99_ratio'))} | {_ms(m['hop_p99_s'], 1)} | "
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
        lines += ["## Server CPU per token, without and with write coalescing", "",
                  "| streams x tok/s | coalesce | server CPU us/token | writes/token | gap p50/p99 (ms) |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for r in cpu["rows"]:
            lines.append(f"| {r['streams']} x {r['tokens_per_s_per_stream']:g} | {r['coalesce_ms']:g} ms | "
                         f"{r['server_cpu_us_per_token']:.1f} | {r['writes_per_token']:.2f} | "
                         f"{_ms(r['gap_p50_s'], 1)} / {_ms(r['gap_p99_s'], 1)} |")
        lines.append("")
    server = results.get("server")
    if server is not None:
        lines += ["## Framing and the whole server path (`python -m server.bench`)", ""]
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
        lines += ["## Engine (`python -m server.engine.bench`, tiny model, CPU)", ""]
        if "result" in engine:
            for run in engine["result"].get("runs", []):
                lines.append(f"- batch {run['batch']}: {run['tokens_per_s']:,.0f} tok/s, step "
                             f"{run['step_ms_median']} ms median ({run['step_ms_p99']} p99)")
        else:
            lines.append(f"- not measured: {engine.get('missing') or engine.get('error')}")
        lines.append("")
    cl = results.get("client")
    if cl:
        lines += ["## The measuring client (against a bare asyncio SSE server)", "",
                  "| loop | streams | events/s | client CPU us/event | client CPU | hop p50/p99 (ms) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in cl["rows"]:
            lines.append(f"| {r['loop']} | {r['streams']} | {r['events_per_s']:,} | "
                         f"{r['client_cpu_us_per_event']:.1f} | {r['client_cpu_pct']:.0f}% | "
                         f"{_ms(r['hop_p50_s'], 3)} / {_ms(r['hop_p99_s'], 3)} |")
        lines.append("")
    return "\n".join(lines)


# ---- command line ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help=f"comma-separated parts (default all): {', '.join(PARTS)}")
    parser.add_argument("--streams", type=int, default=1000, help="streams of the many-streams step")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per many-streams stream")
    parser.add_argument("--rounds", type=int, default=30, help="one-stream TTFT rounds per path")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(list(argv) if argv is not None else None)
    parts = [p.strip() for p in args.only.split(",") if p.strip()] or list(PARTS)
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")

    from rich.console import Console

    raise_own_fd_limit()
    args.out.mkdir(parents=True, exist_ok=True)
    console = Console()
    results: dict[str, Any] = {}
    command = "python -m labs bench" + (" " + " ".join(argv) if argv else "")
    started = time.monotonic()
    # Progress as plain lines, no spinner: a spinner is a thread, and a thread that takes the
    # GIL while the client's send() syscall has released it delays the client's clock reading
    # after the write (measured: one-stream TTFT read 13 us, below the loopback round trip).
    def progress(message: str) -> None:
        console.print(f"[dim]{message}[/]")

    steps: dict[str, Callable[[], dict[str, Any]]] = {
        "proxies": lambda: bench_proxies(args.streams, args.duration, args.rounds, progress),
        "server-cpu": lambda: bench_server_cpu(4.0, progress),
        "server": lambda: run_module("server.bench", args.out / "server.json"),
        "engine": lambda: run_module("server.engine.bench", args.out / "engine.json"),
        "client": lambda: bench_client(progress),
    }
    for part in parts:
        progress(part)
        try:
            results[part] = steps[part]()
        except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others
            results[part] = {"error": f"{type(exc).__name__}: {exc}"}
        if "result" not in results[part]:  # server.bench and engine.bench wrote their own
            (args.out / f"{part}.json").write_text(json.dumps(results[part], indent=2, default=str) + "\n")
    for part in PARTS:  # the parts not run this time: their last results, if any
        saved = args.out / f"{part}.json"
        if part not in results and saved.exists():
            data = json.loads(saved.read_text())
            results[part] = {"result": data} if part in ("server", "engine") else data
    text = markdown(results, command) + f"\nWall time: {time.monotonic() - started:.0f} s.\n"
    (args.out / "bench.md").write_text(text)
    console.print(text)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
