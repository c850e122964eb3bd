"""A lean SSE client on raw asyncio sockets: when each read arrived and how many events it held."""
from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class StreamResult:
    status: int
    headers: dict[str, str]
    ttfb_s: float  # request sent -> first byte of the response
    ttft_s: float | None  # request sent -> first `data:` event
    e2e_s: float
    reads: list[tuple[float, int]] = field(default_factory=list)  # (time since send, events in that read)
    body: bytes = b""
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
    raw = b""
    reads: list[tuple[float, int]] = []
    ttfb = ttft = None
    closed_at = None
    head_end = -1
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
                before = raw.count(b"data:") if head_end >= 0 else 0
                raw += chunk
                if head_end < 0:
                    head_end = raw.find(b"\r\n\r\n")
                    if head_end < 0:
                        continue
                count = raw[head_end:].count(b"data:") - before
                reads.append((now, count))
                if count and ttft is None:
                    ttft = now
                if abort_after_events is not None and sum(c for _, c in reads) >= abort_after_events:
                    closed_at = time.monotonic()
                    break
    finally:
        writer.close()
    e2e = time.perf_counter() - sent
    head, _, rest = raw.partition(b"\r\n\r\n")
    head_lines = head.decode("latin-1").split("\r\n")
    status = int(head_lines[0].split(" ")[1]) if head_lines and head_lines[0] else 0
    response_headers = {k.strip().lower(): v.strip() for k, _, v in
                        (line.partition(":") for line in head_lines[1:])}
    return StreamResult(status=status, headers=response_headers, ttfb_s=ttfb or e2e, ttft_s=ttft,
                        e2e_s=e2e, reads=reads, body=rest, sent_at=sent_at, closed_at=closed_at)


def stream_sync(url: str, **kwargs: object) -> StreamResult:
    return asyncio.run(stream(url, **kwargs))  # type: ignore[arg-type]
