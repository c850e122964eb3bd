"""A lean SSE client on raw asyncio sockets: when each read arrived and how many events it held."""
from __future__ import annotations

import asyncio
import json
import re
import time
import zlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit


class BodyDecoder:
    """Undo chunked framing and gzip/deflate, incrementally, so events can be counted per read."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        encoding = headers.get("content-encoding", "").lower()
        self.inflate = (zlib.decompressobj(31) if encoding == "gzip"
                        else zlib.decompressobj() if encoding == "deflate" else None)
        self.pending = b""  # framed bytes not yet decoded
        self.remaining = 0  # bytes left in the current chunk

    def feed(self, data: bytes) -> bytes:
        payload = self._unchunk(data) if self.chunked else data
        return self.inflate.decompress(payload) if self.inflate else payload

    def _unchunk(self, data: bytes) -> bytes:
        self.pending += data
        out = b""
        while self.pending:
            if self.remaining:
                take = self.pending[:self.remaining]
                out += take
                self.pending = self.pending[len(take):]
                self.remaining -= len(take)
                if self.remaining:
                    break
                self.remaining = -2  # the CRLF after the chunk
            if self.remaining < 0:
                if len(self.pending) < 2:
                    break
                self.pending, self.remaining = self.pending[2:], 0
                continue
            line_end = self.pending.find(b"\r\n")
            if line_end < 0:
                break
            size = int(self.pending[:line_end].split(b";")[0], 16)
            self.pending = self.pending[line_end + 2:]
            if size == 0:
                self.pending = b""
                break
            self.remaining = size
        return out


@dataclass
class StreamResult:
    status: int
    headers: dict[str, str]
    ttfb_s: float  # request sent -> first byte of the response
    ttft_s: float | None  # request sent -> first `data:` event
    e2e_s: float
    reads: list[tuple[float, int]] = field(default_factory=list)  # (time since send, events in that read)
    body: bytes = b""  # decoded: no chunk framing, no compression
    sent_at: float = 0.0  # wall clock (time.time()) when the request was sent
    closed_at: float | None = None  # time.monotonic() when we hung up early (abort_after_*)

    def event_delays(self) -> list[float]:
        """Per event: arrival wall time minus the `"t"` send stamp the upstream put in it."""
        stamps = [float(m) for m in re.findall(rb'"t": ([0-9.]+)', self.body)]
        arrivals = [self.sent_at + at for at, count in self.reads for _ in range(count)]
        return [arrival - stamp for arrival, stamp in zip(arrivals, stamps)]

    @property
    def events(self) -> int:
        return sum(count for _, count in self.reads)

    @property
    def event_reads(self) -> int:
        return sum(1 for _, count in self.reads if count)

    @property
    def events_per_read(self) -> float:
        return self.events / self.event_reads if self.event_reads else 0.0

    @property
    def done(self) -> bool:
        return b"data: [DONE]" in self.body


async def stream(url: str, *, method: str = "GET", body: dict | None = None,
                 headers: dict[str, str] | None = None, timeout_s: float = 30.0,
                 abort_after_events: int | None = None,
                 abort_after_s: float | None = None) -> StreamResult:
    """Send one request and read the response to its end (or hang up after some events)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    payload = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
             f"Host: {parts.netloc}", "Accept: text/event-stream", "Accept-Encoding: gzip",
             "Connection: close"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
    sent, sent_at = time.perf_counter(), time.time()
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
    await writer.drain()
    raw = body = b""
    decoder: BodyDecoder | None = None
    head_lines: list[str] = []
    response_headers: dict[str, str] = {}
    reads: list[tuple[float, int]] = []
    ttfb = ttft = None
    closed_at = None
    loop = asyncio.get_running_loop()
    hang_up_at = loop.time() + abort_after_s if abort_after_s is not None else None
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    async with asyncio.timeout_at(hang_up_at):
                        chunk = await reader.read(65536)
                except TimeoutError:
                    closed_at = time.monotonic()
                    break
                if not chunk:
                    break
                now = time.perf_counter() - sent
                ttfb = now if ttfb is None else ttfb
                if decoder is None:
                    raw += chunk
                    head_end = raw.find(b"\r\n\r\n")
                    if head_end < 0:
                        continue
                    head, chunk = raw[:head_end], raw[head_end + 4:]
                    head_lines = head.decode("latin-1").split("\r\n")
                    response_headers = {k.strip().lower(): v.strip() for k, _, v in
                                        (line.partition(":") for line in head_lines[1:])}
                    decoder = BodyDecoder(response_headers)
                before = body.count(b"\n\n")
                body += decoder.feed(chunk)
                # An event counts once its blank line has arrived: only then can a client dispatch it.
                count = body.count(b"\n\n") - before
                reads.append((now, count))
                if count and ttft is None:
                    ttft = now
                if abort_after_events is not None and sum(c for _, c in reads) >= abort_after_events:
                    closed_at = time.monotonic()
                    break
    finally:
        writer.close()
    e2e = time.perf_counter() - sent
    status = int(head_lines[0].split(" ")[1]) if head_lines and head_lines[0] else 0
    return StreamResult(status=status, headers=response_headers, ttfb_s=ttfb or e2e, ttft_s=ttft,
                        e2e_s=e2e, reads=reads, body=body, sent_at=sent_at, closed_at=closed_at)


def stream_sync(url: str, **kwargs: object) -> StreamResult:
    return asyncio.run(stream(url, **kwargs))  # type: ignore[arg-type]
