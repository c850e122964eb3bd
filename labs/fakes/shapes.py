"""What the fake upstream writes: one function per way a hop makes a stream fail.

Each shape writes the bytes a client sees behind the failing hop (the lab's scenarios produce
the same shapes with real proxies and the real server), as OpenAI chat-completion chunks: a
role chunk, one content chunk per token (`t0 `, `t1 `, ... so `script(n)` is the exact text),
a finish chunk and `data: [DONE]`. The query (and the request body's `lab` object) sets the
pacing; every knob has a default, and a bad value is a 400 before anything is streamed.
"""
from __future__ import annotations

import asyncio
import re
import gzip
import json
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Awaitable, Callable

NGINX_504 = (
    b"<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n"
    b"<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n")
LAST_CHUNK = b"0\r\n\r\n"


def chunk(obj: dict | str, stamp: bool = False) -> bytes:
    """One SSE data event; `stamp` adds `sent_at` (wall clock at framing), as `lab.stamp` does."""
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
    """The exact text of a shape's `n` content events."""
    return "".join(token(i) for i in range(n))


def chunked(data: bytes) -> bytes:
    """One HTTP/1.1 chunk (nothing for no data: an empty chunk would end the body)."""
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


class BadQuery(ValueError):
    """A knob that is not a number: answered with a 400 naming it."""


@dataclass
class UpstreamStats:
    connections: int = 0
    heads: int = 0  # requests whose headers arrived (a request still sending its body included)
    requests: int = 0  # requests read whole
    body_bytes: int = 0  # request body bytes received, whole bodies or not
    completed: int = 0  # streams written to their end
    flaky: int = 0  # requests answered by the /flaky shape (which of them it cuts)
    # For each client that left mid-stream: seconds from our last write to it until we saw its
    # close (we watch the socket for EOF while pacing, not only when a write fails).
    disconnects: list[float] = field(default_factory=list)


@dataclass
class Reply:
    """One request being answered: its knobs, the connection, and whether it may be reused."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    knobs: dict[str, str]  # the query, with the body's `lab` fields over it
    http10: bool  # the request was HTTP/1.0: no chunked encoding, the body ends with the close
    keep_alive: bool  # the client asked to reuse the connection
    stats: UpstreamStats
    reusable: bool = False  # set by a shape that ended its body cleanly on a kept-alive connection
    last_write: float = 0.0  # perf_counter() of the latest write
    pushback: bytes = b""  # bytes of the next request read while watching for a close

    def int(self, name: str, default: int) -> int:
        return int(self._number(name, default, int))

    def float(self, name: str, default: float) -> float:
        return float(self._number(name, default, float))

    def flag(self, name: str) -> bool:
        return self.knobs.get(name, "").lower() not in ("", "0", "false", "no")

    def _number(self, name: str, default: float, kind: type) -> float:
        value = self.knobs.get(name)
        if value is None:
            return default
        try:
            return kind(value)
        except ValueError:
            raise BadQuery(f"{name}={value!r} is not a {kind.__name__}") from None

    def write(self, data: bytes) -> None:
        self.writer.write(data)
        self.last_write = time.perf_counter()

    async def drain(self) -> None:
        await self.writer.drain()

    def reset(self) -> None:
        """Close with an RST (SO_LINGER 0) instead of a FIN, as a crashing process does."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Shape = Callable[[Reply], Awaitable[None]]


async def paced(r: Reply) -> None:
    """A healthy stream: one event per write, `interval` apart (n content events, one read each).

    n=20, interval=0.02 s, headers_delay_s=0 (silence before the headers), heartbeat_every=K
    (a `: ping` before every K-th event), stamp=1 (`sent_at` in each chunk), accel=1
    (`X-Accel-Buffering: no`), content_type=TYPE (the header only: the body stays SSE-framed). An HTTP/1.0 request gets a close-delimited body, as from an
    HTTP/1.0 server; an HTTP/1.1 one a chunked body, on a connection that can be kept alive.
    A client that closes mid-stream is seen at once (the pause between events watches for it).
    """
    n, interval, beat = r.int("n", 20), r.float("interval", 0.02), r.int("heartbeat_every", 0)
    delay, stamp = r.float("headers_delay_s", 0.0), r.flag("stamp")
    if delay:
        await asyncio.sleep(delay)  # the upstream's silence before its headers (what is tested)
    frame = chunked if not r.http10 else (lambda data: data)
    content_type = r.knobs.get("content_type", "text/event-stream")
    if not re.fullmatch(r"[A-Za-z0-9!#$&^_.+/=; -]{1,100}", content_type):
        raise BadQuery(f"content_type={content_type!r} is not a media type")
    head = ["HTTP/1.1 200 OK" if not r.http10 else "HTTP/1.0 200 OK",
            f"content-type: {content_type}", "cache-control: no-cache"]
    if r.flag("accel"):
        head.append("x-accel-buffering: no")
    head.append("transfer-encoding: chunked" if not r.http10 else "connection: close")
    if not r.http10 and not r.keep_alive:
        head.append("connection: close")
    r.write(("\r\n".join(head) + "\r\n\r\n").encode() + frame(chunk(delta("", role="assistant"), stamp)))
    await r.drain()
    # A read that returns b"" while we stream means the client (or the proxy) closed.
    closed = asyncio.ensure_future(r.reader.read(1))
    try:
        for i in range(n):
            await asyncio.wait([closed], timeout=interval)  # the pacing, cut short by a close
            if closed.done():
                data = b"" if closed.exception() else closed.result()
                if not data:  # EOF, or a reset
                    r.stats.disconnects.append(time.perf_counter() - r.last_write)
                    raise ConnectionResetError("the client closed while we streamed")
                r.pushback += data  # the next request began: keep its first byte
                closed = asyncio.ensure_future(r.reader.read(1))
            data = chunk(delta(token(i)), stamp)
            if beat and i % beat == 0:
                data = b": ping\n\n" + data
            r.write(frame(data))
            await r.drain()
    finally:
        closed.cancel()
        try:
            r.pushback += await closed  # the next request's read must not race this one
        except (asyncio.CancelledError, ConnectionError):
            pass
    r.write(frame(chunk(delta(finish="stop"), stamp) + chunk("[DONE]")) + (b"" if r.http10 else LAST_CHUNK))
    await r.drain()
    r.stats.completed += 1
    r.reusable = r.keep_alive and not r.http10


async def lump(r: Reply) -> None:
    """A buffering hop: headers and every event in one write at the end (TTFT = E2E)."""
    n, interval = r.int("n", 20), r.float("interval", 0.02)
    await asyncio.sleep(n * interval)  # the stream's whole length, held back
    body = chunk(delta("", role="assistant")) + b"".join(chunk(delta(token(i))) for i in range(n))
    body += chunk(delta(finish="stop")) + chunk("[DONE]")
    r.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))
    await r.drain()


async def truncated(r: Reply) -> None:
    """A proxy timeout mid-stream: k events, then FIN without [DONE] and without the last chunk."""
    k, interval = r.int("k", 5), r.float("interval", 0.01)
    r.write(HEAD_CHUNKED + b"\r\n")
    for i in range(k):
        r.write(chunked(chunk(delta(token(i)))))
        await asyncio.sleep(interval)  # pacing between events
    await r.drain()


async def flaky(r: Reply) -> None:
    """A hop that ends some streams just after their headers (Traefik 3.7 does it to ~1% of POST
    streams, docs/field-notes.md): of every `every` (2) requests to this shape, the first gets its
    headers and the role chunk, then a FIN without the last chunk; the others stream as /paced.
    every=1 cuts them all."""
    r.stats.flaky += 1
    if (r.stats.flaky - 1) % max(1, r.int("every", 2)):
        await paced(r)
        return
    r.write(HEAD_CHUNKED + b"\r\n" + chunked(chunk(delta("", role="assistant"))))
    await r.drain()


async def gateway_timeout(r: Reply) -> None:
    """nginx's 504 page after its proxy_read_timeout, before any header from upstream."""
    await asyncio.sleep(r.float("delay", 0.05))  # the proxy's wait for its upstream
    r.write(b"HTTP/1.1 504 Gateway Time-out\r\nServer: nginx/1.22.1\r\nContent-Type: text/html\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(NGINX_504), NGINX_504))
    await r.drain()


async def gzip_flushed(r: Reply) -> None:
    """gzip with a sync flush per event (nginx with buffering off): still streams."""
    n, interval = r.int("n", 10), r.float("interval", 0.02)
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    r.write(HEAD_CHUNKED + b"content-encoding: gzip\r\n\r\n")
    for i in range(n):
        r.write(chunked(z.compress(chunk(delta(token(i)))) + z.flush(zlib.Z_SYNC_FLUSH)))
        await r.drain()
        await asyncio.sleep(interval)  # pacing between events
    r.write(chunked(z.compress(chunk(delta(finish="stop")) + chunk("[DONE]")) + z.flush()) + LAST_CHUNK)
    await r.drain()


async def gzip_lump(r: Reply) -> None:
    """A whole-body gzip (a compressing middleware that buffers): one read of compressed bytes."""
    n = r.int("n", 10)
    body = gzip.compress(b"".join(chunk(delta(token(i))) for i in range(n)) + chunk("[DONE]"))
    r.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))
    await r.drain()


async def error(r: Reply) -> None:
    """An error after k tokens, in-band, then [DONE] (the server's contract)."""
    k = r.int("k", 3)
    body = b"".join(chunk(delta(token(i))) for i in range(k))
    body += chunk({"error": {"message": "engine failed", "type": "server_error", "param": None,
                             "code": None}}) + chunk("[DONE]")
    r.write(HEAD_CHUNKED + b"\r\n" + chunked(body) + LAST_CHUNK)
    await r.drain()


async def rst(r: Reply) -> None:
    """A crash: k events, then an RST instead of a FIN."""
    k = r.int("k", 3)
    r.write(HEAD_CHUNKED + b"\r\n" + b"".join(chunked(chunk(delta(token(i)))) for i in range(k)))
    await r.drain()
    await asyncio.sleep(r.float("delay", 0.05))  # the events arrive before the crash
    r.reset()


async def silence(r: Reply) -> None:
    """k events, then a long silence (against a read timeout); before_headers=1: silent first."""
    k, quiet = r.int("k", 2), r.float("silence", 3.0)
    if r.flag("before_headers"):
        await asyncio.sleep(quiet)  # the silence under test
    r.write(HEAD_CHUNKED + b"\r\n" + b"".join(chunked(chunk(delta(token(i)))) for i in range(k)))
    await r.drain()
    await asyncio.sleep(quiet)  # the silence under test


async def http10(r: Reply) -> None:
    """A close-delimited body (HTTP/1.0, no length) to any request: the body ends with the close."""
    n, interval = r.int("n", 5), r.float("interval", 0.01)
    r.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
    for i in range(n):
        r.write(chunk(delta(token(i))))
        await r.drain()
        await asyncio.sleep(interval)  # pacing between events
    r.write(chunk("[DONE]"))
    await r.drain()


async def holdback(r: Reply) -> None:
    """HAProxy compression's shape: each event's final newline leaves with the next event."""
    n, interval = r.int("n", 5), r.float("interval", 0.05)
    r.write(HEAD_CHUNKED + b"\r\n")
    pending = b""
    for i in range(n):
        frame = chunk(delta(token(i)))
        r.write(chunked(pending + frame[:-1]))
        pending = frame[-1:]
        await r.drain()
        await asyncio.sleep(interval)  # pacing between events
    r.write(chunked(pending + chunk("[DONE]")) + LAST_CHUNK)
    await r.drain()


async def close_early(r: Reply) -> None:
    """A proxy out of connections: the request is read, then the socket closes (rst=1: resets)."""
    if r.flag("rst"):
        r.reset()


async def crlf(r: Reply) -> None:
    """CRLF line endings, with a CR and its LF split across two writes."""
    r.write(HEAD_CHUNKED + b"\r\n" + chunked(b": hi\r\ndata: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\r"))
    await r.drain()
    await asyncio.sleep(0.02)  # a gap between two writes (what is tested)
    r.write(chunked(b"\n\r\ndata: [DONE]\r\n\r\n") + LAST_CHUNK)
    await r.drain()


# The path names the shape; the server's own path is the healthy stream, so a proxy in front
# of the fake forwards the path its users send.
SHAPES: dict[str, Shape] = {
    "/paced": paced, "/v1/chat/completions": paced,
    "/lump": lump, "/truncated": truncated, "/gateway-timeout": gateway_timeout,
    "/gzip": gzip_flushed, "/gzip-lump": gzip_lump, "/error": error, "/rst": rst,
    "/silence": silence, "/http10": http10, "/holdback": holdback, "/close-early": close_early,
    "/crlf": crlf, "/flaky": flaky,
}
