"""A minimal SSE upstream for proxy tests: raw asyncio, HTTP/1.0 and 1.1, keep-alive, in a thread.

Every request gets an event stream, shaped by query parameters:
    n=20 events, interval=0.1 s between them, delay=0 s before the headers,
    accel=1 sends `X-Accel-Buffering: no`, size=pad each event's data to this many bytes.
`/healthz` answers `ok`. The server counts connections and notes when a client disconnects
mid-stream (at once, by watching the socket for EOF, not only when a write fails).
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import parse_qs, urlsplit


@dataclass
class UpstreamStats:
    connections: int = 0
    requests: int = 0
    completed: int = 0
    disconnects: list[float] = field(default_factory=list)  # monotonic times a client vanished


@dataclass
class SseUpstream:
    host: str
    port: int
    stats: UpstreamStats

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def event(index: int, size: int) -> bytes:
    payload = f'{{"i": {index}, "t": {time.time():.6f}}}'
    if size > len(payload):
        payload = payload[:-1] + ', "pad": "' + "x" * (size - len(payload) - 10) + '"}'
    return f"data: {payload}\n\n".encode()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length:
        await reader.readexactly(length)
    return target, version, headers


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: UpstreamStats) -> None:
    stats.connections += 1
    try:
        while (request := await _read_request(reader)) is not None:
            stats.requests += 1
            target, version, headers = request
            keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
            url = urlsplit(target)
            if url.path == "/healthz":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n"
                             + (b"" if keep_alive else b"Connection: close\r\n") + b"\r\nok")
                await writer.drain()
                if not keep_alive:
                    break
                continue
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            count, interval = int(query.get("n", 20)), float(query.get("interval", 0.1))
            size, delay = int(query.get("size", 0)), float(query.get("delay", 0))
            if delay:
                await asyncio.sleep(delay)  # the upstream's silence before headers (what is tested)
            chunked = version == "HTTP/1.1"
            head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache"]
            if query.get("accel") == "1":
                head.append("X-Accel-Buffering: no")
            head.append("Transfer-Encoding: chunked" if chunked else "Connection: close")
            if chunked and not keep_alive:
                head.append("Connection: close")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
            await writer.drain()
            # A read that returns b"" while we stream means the client (the proxy) closed.
            closed = asyncio.ensure_future(reader.read(1))
            try:
                for index in range(count):
                    if index:
                        await asyncio.wait([closed], timeout=interval)
                    if closed.done() and not closed.result():
                        raise ConnectionResetError("peer closed while streaming")
                    body = event(index, size) if index < count - 1 else b"data: [DONE]\n\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(body), body) if chunked else body)
                    await writer.drain()
            finally:
                closed.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await closed  # the next request's read must not race this one
            if chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            stats.completed += 1
            if not (chunked and keep_alive):
                break
    except (ConnectionError, asyncio.IncompleteReadError):
        stats.disconnects.append(time.monotonic())
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


@contextlib.contextmanager
def sse_upstream(host: str = "127.0.0.1") -> Iterator[SseUpstream]:
    """Run the upstream on a free port in a background thread until the block ends."""
    loop = asyncio.new_event_loop()
    stats = UpstreamStats()
    started = threading.Event()
    holder: dict[str, asyncio.AbstractServer] = {}

    async def start() -> None:
        holder["server"] = await asyncio.start_server(
            lambda r, w: _serve(r, w, stats), host, 0)
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()),
                              name="sse-upstream", daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("SSE upstream did not start")
    server = holder["server"]
    port = server.sockets[0].getsockname()[1]
    try:
        yield SseUpstream(host=host, port=port, stats=stats)
    finally:
        async def stop() -> None:
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
