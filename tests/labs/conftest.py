"""A small SSE upstream that fails the way proxies make streams fail, for the client's tests.

It runs in its own thread with its own event loop, so the client under test keeps a loop to
itself. The path picks the behaviour, the query its pacing: `/paced?n=20&interval=0.02`.
Each behaviour writes the bytes a client sees behind the failing hop (the lab's scenarios
produce the same shapes with real proxies).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import h11
import pytest

NGINX_504 = (
    b"<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n"
    b"<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n"
    b"</body>\r\n</html>\r\n"
)


def chunk(obj: dict | str, stamp: bool = False) -> bytes:
    """One SSE data event, as the server frames it."""
    if isinstance(obj, dict):
        if stamp:
            obj = {**obj, "sent_at": time.time()}
        obj = json.dumps(obj, ensure_ascii=False)
    return f"data: {obj}\n\n".encode()


def delta(content: str | None = None, role: str | None = None, finish: str | None = None) -> dict:
    d: dict = {}
    if role:
        d["role"] = role
    if content is not None:
        d["content"] = content
    return {"id": "c1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def token(i: int) -> str:
    return f"t{i} "


def script(n: int) -> str:
    return "".join(token(i) for i in range(n))


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n")
LAST_CHUNK = b"0\r\n\r\n"


class Upstream:
    """Serves the behaviours below on 127.0.0.1; `url(path)` gives the full URL."""

    def __init__(self) -> None:
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):  # readiness is signalled by the thread, not guessed
            raise RuntimeError("stub upstream did not start")

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        # stopped: end the handlers still sleeping (silences) before the loop goes away
        server.close()
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.loop.run_until_complete(server.wait_closed())
        self.loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        target = b"/"
        body = bytearray()
        try:
            while True:  # read the whole request (the client sends a JSON body)
                ev = conn.next_event()
                if ev is h11.NEED_DATA:
                    data = await reader.read(65536)
                    conn.receive_data(data)
                    if not data:
                        break
                elif isinstance(ev, h11.Request):
                    target = ev.target
                elif isinstance(ev, h11.Data):
                    body += ev.data
                elif isinstance(ev, h11.EndOfMessage):
                    break
            parts = urlsplit(target.decode())
            q = {k: v[0] for k, v in parse_qs(parts.query).items()}
            # the server's `lab` knobs, where a behaviour honours them (headers_delay_s)
            lab = json.loads(body or b"{}").get("lab") or {}
            q.update({k: str(v) for k, v in lab.items()})
            await getattr(self, "do_" + parts.path.strip("/").replace("-", "_"))(writer, q)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    # ---- behaviours -----------------------------------------------------------------------

    async def do_paced(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """One event per write, `interval` apart: n bursts, TTFT about one interval."""
        n, interval, stamp = int(q.get("n", 20)), float(q.get("interval", 0.02)), "stamp" in q
        beat = int(q.get("heartbeat_every", 0))
        # The stub's silence before the headers: what the test measures.
        await asyncio.sleep(float(q.get("headers_delay_s", 0)))  # paced, not a readiness wait
        w.write(HEAD_CHUNKED + b"\r\n" + chunked(chunk(delta("", role="assistant"), stamp)))
        for i in range(n):
            await asyncio.sleep(interval)
            frame = chunk(delta(token(i)), stamp)
            if beat and i % beat == 0:
                frame = b": ping\n\n" + frame
            w.write(chunked(frame))
            await w.drain()
        w.write(chunked(chunk(delta(finish="stop"), stamp) + chunk("[DONE]")) + LAST_CHUNK)
        await w.drain()

    async def do_lump(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """A buffering hop: headers and every event in one write at the end (TTFT = E2E)."""
        n, interval = int(q.get("n", 20)), float(q.get("interval", 0.02))
        await asyncio.sleep(n * interval)
        body = chunk(delta("", role="assistant")) + b"".join(chunk(delta(token(i))) for i in range(n))
        body += chunk(delta(finish="stop")) + chunk("[DONE]")
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body))
        await w.drain()

    async def do_truncated(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """A proxy timeout mid-stream: k events, then FIN without [DONE] and without the last chunk."""
        k, interval = int(q.get("k", 5)), float(q.get("interval", 0.01))
        w.write(HEAD_CHUNKED + b"\r\n")
        for i in range(k):
            w.write(chunked(chunk(delta(token(i)))))
            await asyncio.sleep(interval)
        await w.drain()

    async def do_gateway_timeout(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """nginx's 504 page after its proxy_read_timeout, before any header from upstream."""
        await asyncio.sleep(float(q.get("delay", 0.05)))  # pacing between events
        w.write(b"HTTP/1.1 504 Gateway Time-out\r\nServer: nginx/1.22.1\r\nContent-Type: text/html\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(NGINX_504), NGINX_504))
        await w.drain()

    async def do_gzip(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """gzip with a sync flush per event (nginx with buffering off): still streams."""
        n, interval = int(q.get("n", 10)), float(q.get("interval", 0.02))
        z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        w.write(HEAD_CHUNKED + b"content-encoding: gzip\r\n\r\n")
        for i in range(n):
            w.write(chunked(z.compress(chunk(delta(token(i)))) + z.flush(zlib.Z_SYNC_FLUSH)))
            await w.drain()
            await asyncio.sleep(interval)
        w.write(chunked(z.compress(chunk(delta(finish="stop")) + chunk("[DONE]")) + z.flush()) + LAST_CHUNK)
        await w.drain()

    async def do_gzip_lump(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """A whole-body gzip (a compressing middleware that buffers): one read of compressed bytes."""
        n = int(q.get("n", 10))
        raw = b"".join(chunk(delta(token(i))) for i in range(n)) + chunk("[DONE]")
        body = gzip.compress(raw)
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body))
        await w.drain()

    async def do_error(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """An error after k tokens, in-band, then [DONE] (the server's contract)."""
        k = int(q.get("k", 3))
        body = b"".join(chunk(delta(token(i))) for i in range(k))
        body += chunk({"error": {"message": "engine failed", "type": "server_error", "param": None,
                                 "code": None}}) + chunk("[DONE]")
        w.write(HEAD_CHUNKED + b"\r\n" + chunked(body) + LAST_CHUNK)
        await w.drain()

    async def do_rst(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """A crash: k events, then an RST (SO_LINGER 0) instead of a FIN."""
        k = int(q.get("k", 3))
        w.write(HEAD_CHUNKED + b"\r\n" + b"".join(chunked(chunk(delta(token(i)))) for i in range(k)))
        await w.drain()
        await asyncio.sleep(float(q.get("delay", 0.05)))  # pacing between events
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.transport.abort()

    async def do_silence(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """k events, then a long silence (against the client's read timeout)."""
        k, silence = int(q.get("k", 2)), float(q.get("silence", 3.0))
        if q.get("before_headers"):
            await asyncio.sleep(silence)  # the silence under test
        w.write(HEAD_CHUNKED + b"\r\n" + b"".join(chunked(chunk(delta(token(i)))) for i in range(k)))
        await w.drain()
        await asyncio.sleep(silence)  # the silence under test

    async def do_http10(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """A close-delimited body (HTTP/1.0, no length): the body ends with the connection."""
        n, interval = int(q.get("n", 5)), float(q.get("interval", 0.01))
        w.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for i in range(n):
            w.write(chunk(delta(token(i))))
            await w.drain()
            await asyncio.sleep(interval)
        w.write(chunk("[DONE]"))
        await w.drain()

    async def do_holdback(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """HAProxy compression's shape: each event's final newline leaves with the next event."""
        n, interval = int(q.get("n", 5)), float(q.get("interval", 0.05))
        w.write(HEAD_CHUNKED + b"\r\n")
        pending = b""
        for i in range(n):
            frame = chunk(delta(token(i)))
            w.write(chunked(pending + frame[:-1]))
            pending = frame[-1:]
            await w.drain()
            await asyncio.sleep(interval)
        w.write(chunked(pending + chunk("[DONE]")) + LAST_CHUNK)
        await w.drain()

    async def do_close_early(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """A proxy out of connections: the request is read, then the socket closes (or resets)."""
        if "rst" in q:
            sock = w.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.transport.abort()

    async def do_crlf(self, w: asyncio.StreamWriter, q: dict[str, str]) -> None:
        """CRLF line endings, with a CR and its LF split across two writes."""
        w.write(HEAD_CHUNKED + b"\r\n" + chunked(b": hi\r\ndata: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\r"))
        await w.drain()
        await asyncio.sleep(0.02)  # a gap between two writes (what is tested)
        w.write(chunked(b"\n\r\ndata: [DONE]\r\n\r\n") + LAST_CHUNK)
        await w.drain()


@dataclass
class Stub:
    upstream: Upstream

    def url(self, path: str) -> str:
        return self.upstream.url(path)


@pytest.fixture(scope="session")
def stub() -> Iterator[Stub]:
    up = Upstream()
    up.start()
    yield Stub(up)
    up.stop()


BODY = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


if __name__ == "__main__":  # a standalone upstream for measuring the client's own CPU
    import sys

    up = Upstream()
    up.start()
    print(up.port, flush=True)
    sys.stdin.read()  # runs until the parent closes stdin
