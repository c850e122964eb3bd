"""Part 5, `client`: the measuring client's own cost (CPU per event) and the hop delay it measures
against a bare asyncio SSE server (no framework): the floor under every hop-delay figure."""
from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import socket
from typing import Any, Iterator

from labs import client
from labs.bench.proxies import Progress
from labs.client.driver import no_gc_pauses
from labs.client.results import percentile

CLIENT_STREAMS = 300  # the many-streams case: 20 events/s each for 3 s


def _bare_sse_server(sock: socket.socket) -> None:
    """A bare asyncio SSE server (child process): asyncio's streams, no HTTP library, no
    framework. It reads a request and answers with labs/bench/reference_stream.py's stream (the
    lab server's, in shape): `n` events `interval` apart, the write per event its whole cost."""
    import asyncio

    from labs.bench import reference_stream as stream

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head_block = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head_block.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        spec = json.loads(await reader.readexactly(length))
        writer.write(stream.RESPONSE_HEAD + stream.chunk(stream.ROLE))
        for i in range(spec["n"]):
            if i:
                await asyncio.sleep(spec["interval"])
            writer.write(stream.chunk(stream.content(i)))
        writer.write(stream.TAIL)
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
def bare_server_process() -> Iterator[tuple[str, int]]:
    """The bare server in a child process: its URL and its PID (for its CPU). It answers a body
    `{"n": events, "interval": seconds}`."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    process = multiprocessing.get_context("fork").Process(target=_bare_sse_server, args=(sock,), daemon=True)
    process.start()
    try:
        assert process.pid is not None
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/", process.pid
    finally:
        process.terminate()
        process.join(5)
        sock.close()


@contextlib.contextmanager
def bare_server() -> Iterator[str]:
    with bare_server_process() as (url, _):
        yield url


def _client_case(url: str, streams: int, n: int, interval: float, loop: str) -> dict[str, Any]:
    body = {"n": n, "interval": interval}
    factory = None
    if loop == "uvloop":
        import uvloop
        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner, no_gc_pauses():
        batch = runner.run(client.run_many(url, [body] * streams, streams, 60.0))
    hops = [h for r in batch.results for h in r.hop_delays]
    events = sum(len(r.events) for r in batch.results)
    return {"loop": loop, "streams": streams, "events_per_s": round(events / batch.wall_s),
            "complete": sum(r.outcome == "complete" for r in batch.results),
            "client_cpu_us_per_event": batch.client_cpu_s / events * 1e6 if events else None,
            "client_cpu_pct": 100 * batch.client_cpu_s / batch.wall_s,
            "hop_p50_s": percentile(hops, 50), "hop_p99_s": percentile(hops, 99)}


def bench_client(progress: Progress, streams: int = CLIENT_STREAMS) -> dict[str, Any]:
    """The client against a bare server: what the client (and loopback) add by themselves."""
    rows = []
    with bare_server() as url:
        for loop in ("uvloop", "asyncio"):
            progress(f"client: 1 stream, {loop}")
            rows.append(_client_case(url, 1, 400, 0.005, loop))
            progress(f"client: {streams} streams x 20 events/s, {loop}")
            rows.append(_client_case(url, streams, 60, 0.05, loop))
    return {"rows": rows}
