"""A fake SSE upstream that misbehaves on request: for tests and tools that need a bad server.

    with fake_upstream() as up:
        up.url("/paced?n=20&interval=0.05")     # a healthy paced stream
        up.url("/lump?n=20")                    # a buffering hop's shape
        up.stats.disconnects                    # clients that left mid-stream, and how fast we saw it

The path picks the shape (`labs.fakes.shapes.SHAPES`; `/v1/chat/completions` is the healthy
paced stream, so a proxy in front forwards what its clients send), the query sets its pacing,
and a JSON body's `lab` object may set the same knobs (so a request meant for the real server
drives the fake the same way). `/healthz` answers `ok`. HTTP/1.0 and 1.1, keep-alive for the
shapes that end their body cleanly.

It runs on 127.0.0.1 in a thread with its own event loop, so a client under test keeps a loop to
itself. `python -m labs.fakes.upstream` runs one in the foreground (its port on the first line,
until stdin closes), to measure a client in another process.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

import h11

from labs.fakes.shapes import SHAPES, BadQuery, Reply, UpstreamStats

__all__ = ["FakeUpstream", "UpstreamStats", "fake_upstream"]


class FakeUpstream:
    """The server; `start()` returns once it listens (signalled by its thread, never guessed)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.stats = UpstreamStats()
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fake-upstream", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str = "/v1/chat/completions") -> str:
        return self.base_url + path

    def start(self) -> "FakeUpstream":
        self._thread.start()
        if not self._ready.wait(10) or self._failed is not None:
            raise RuntimeError(f"the fake upstream did not start: {self._failed!r}")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    def __enter__(self) -> "FakeUpstream":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            server = self.loop.run_until_complete(
                asyncio.start_server(self._connection, self.host, 0, backlog=1024))
        except OSError as exc:
            self._failed = exc
            self._ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        # Stopped: end the handlers still pacing or sleeping (silences) before the loop goes away.
        server.close()
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.loop.run_until_complete(server.wait_closed())
        self.loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        leftover = b""
        try:
            while (request := await _read_request(reader, leftover, self.stats)) is not None:
                self.stats.requests += 1
                head, body, leftover = request
                reply = await self._answer(head, body, reader, writer)
                leftover = reply.pushback + leftover
                if not reply.reusable:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: what a shape that cares about it records itself
        finally:
            if not writer.is_closing():
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, head: h11.Request, body: bytes, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> Reply:
        target = urlsplit(head.target.decode("latin-1"))
        knobs = {k: v[-1] for k, v in parse_qs(target.query).items()}
        knobs.update(_lab_knobs(body))
        http10 = head.http_version == b"1.0"
        connection = next((v.lower() for k, v in head.headers if k == b"connection"), b"")
        keep_alive = not http10 and b"close" not in connection
        reply = Reply(reader, writer, knobs, http10, keep_alive, self.stats)
        if target.path == "/healthz":
            _plain(reply, 200, b"ok")
            reply.reusable = keep_alive
        elif target.path not in SHAPES:
            _plain(reply, 404, f"no shape {target.path}; the shapes: {', '.join(sorted(SHAPES))}".encode())
        else:
            try:
                await SHAPES[target.path](reply)
            except BadQuery as exc:  # raised before a shape writes anything
                _plain(reply, 400, str(exc).encode())
        await writer.drain()
        return reply


def _lab_knobs(body: bytes) -> dict[str, str]:
    """The `lab` object of a JSON body as knobs (`stamp: true` -> "true"); {} for any other body."""
    try:
        parsed = json.loads(body) if body.strip() else {}
    except ValueError:
        return {}
    lab = parsed.get("lab") if isinstance(parsed, dict) else None
    if not isinstance(lab, dict):
        return {}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in lab.items()}


def _plain(reply: Reply, status: int, text: bytes) -> None:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
    close = b"" if reply.keep_alive and status == 200 else b"connection: close\r\n"
    reply.write(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n%s\r\n%s"
                % (status, reason, len(text), close, text))


async def _read_request(reader: asyncio.StreamReader, leftover: bytes,
                        stats: UpstreamStats) -> tuple[h11.Request, bytes, bytes] | None:
    """The next request (head, body, bytes after it), or None when the client closed or sent
    something that is not HTTP. Content-Length and chunked request bodies both work, of any
    size (no limit of its own); every body byte is counted as it arrives, a cut body's too."""
    conn = h11.Connection(h11.SERVER)
    if leftover:  # (an empty receive_data would tell h11 the peer closed)
        conn.receive_data(leftover)
    head: h11.Request | None = None
    body = bytearray()
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))  # b"" tells h11 the peer closed
            elif isinstance(event, h11.Request):
                head = event
                stats.heads += 1
            elif isinstance(event, h11.Data):
                body += event.data
                stats.body_bytes += len(event.data)
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                return head, bytes(body), conn.trailing_data[0]
            elif isinstance(event, h11.ConnectionClosed):
                return None
    except h11.RemoteProtocolError:
        return None


@contextlib.contextmanager
def fake_upstream(host: str = "127.0.0.1") -> Iterator[FakeUpstream]:
    """A started fake upstream on a free port of `host`, stopped when the block ends."""
    with FakeUpstream(host) as upstream:
        yield upstream


def main() -> int:
    with fake_upstream() as upstream:
        print(upstream.port, flush=True)
        sys.stdin.read()  # runs until the parent (or the user, with Ctrl-D) closes stdin
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
