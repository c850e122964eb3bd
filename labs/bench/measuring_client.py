"""Part 5, `client`: the measuring client's own cost (CPU per event) and the hop delay it measures
against a bare asyncio SSE server (no framework): the floor under every hop-delay figure."""
from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import socket
import time
from typing import Any, Iterator

from labs import client
from labs.bench.proxies import Progress
from labs.load import _no_gc_pauses
from labs.client.results import percentile

CLIENT_STREAMS = 300  # the many-streams case: 20 events/s each for 3 s


def _bare_sse_server(sock: socket.socket) -> None:
    """A bare asyncio SSE server (child process): reads a request, answers with `n` chunked
    events `interval` apart, each stamped with the wall clock right before its write.

    Its stream is the lab server's, byte for byte in shape: the role chunk with the headers, one
    OpenAI-shaped content chunk per write, the finish chunk with `[DONE]` and the body's end. So
    a client reading both does the same work: with 3 minimal events instead, the lab's client
    spent ~90 ms less CPU on a burst of 1,000 of the bare server's streams, and their TTFT p99
    was ~80 ms lower (measured side by side), a share of the same two cores that the lab's
    server never had. The write per event is still the whole cost."""
    import asyncio

    head = (b'data: {"id":"chatcmpl-bare","object":"chat.completion.chunk","created":0,'
            b'"model":"bare","system_fingerprint":"fp_bare","choices":[{"index":0,"delta":')
    role = head + b'{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
    finish = head + b'{},"logprobs":null,"finish_reason":"length"}]}\n\n'
    done = b"data: [DONE]\n\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head_block = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head_block.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        spec = json.loads(await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(role), role))
        for i in range(spec["n"]):
            if i:
                await asyncio.sleep(spec["interval"])
            frame = head + (b'{"content":"t%d "},"logprobs":null,"finish_reason":null}],'
                            b'"sent_at":%.6f}\n\n' % (i, time.time()))
            writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        writer.write(b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(finish), finish, len(done), done))
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
    with asyncio.Runner(loop_factory=factory) as runner, _no_gc_pauses():
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
