"""The standalone GET stream, read byte by byte, alone on its connection: when its headers came,
when its first body byte came, every keep-alive comment, and how it ended.

The official client cannot measure this: it opens the GET stream itself, reads it through its SSE
parser (comments never reach its user), and when a hop cuts it, it reopens it and logs at debug
level only (docs/mcp.md). Over HTTP/2 it also opens the GET together with its `initialized`
POST, whose 202 on the same connection flushes headers a hop held (mcp-held-headers). So this one
exchange is plain HTTP (httpx): a session opened with the 2025 revisions' `initialize` and
`notifications/initialized` (JSON-RPC as the spec writes them,
https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#sending-messages-to-the-server),
then, once that is answered, `GET` with `Accept: text/event-stream` and the session's id, held
open and silent up to the wait, then the session deleted. Used by `labs probe --mcp` and by the
MCP scenarios' runner.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
# A 2025 revision both SDK lines the lab runs serve (mcp 1.30 and 2.3): sessions and the GET stream.
PROTOCOL_VERSION = "2025-06-18"
# The stateless revision: no initialize, and its GET is answered 405 (mcp 2.3 does, sessions or not).
STATELESS_VERSION = "2026-07-28"
ACCEPT_POST = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                         "clientInfo": {"name": "streamlab-probe", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# Headers held until the first body byte: they came this late, and with that byte (within the gap).
HELD_AFTER_S = 0.5
HELD_WITH_BYTE_S = 0.05


@dataclass
class GetStream:
    """One standalone GET stream as the client saw it (seconds after the GET was sent)."""

    status: int | None = None
    http_version: str = ""  # what the path spoke to this client: "HTTP/1.1", "HTTP/2"
    session: str | None = None  # the id the initialize answer gave (None: a stateless server)
    headers_s: float | None = None
    first_byte_s: float | None = None
    comments_at_s: list[float] = field(default_factory=list)  # each `:` comment line (keep-alive)
    events: int = 0  # `data:` lines (server notifications)
    last_byte_s: float | None = None
    end_s: float | None = None
    ended: str = ""  # "open at the end of the wait", "closed by the path", "reset: ...", "HTTP 404"
    cut: bool = False  # the path ended it before the wait did
    wait_s: float = 0.0

    @property
    def held_headers(self) -> bool:
        """The headers came late, and only with the first body byte."""
        return (self.headers_s is not None and self.first_byte_s is not None and self.headers_s >= HELD_AFTER_S
                and self.first_byte_s - self.headers_s <= HELD_WITH_BYTE_S)

    @property
    def silent_for_s(self) -> float | None:
        """How long the stream was silent before the cut: from its last byte (a comment resets every
        idle timer on the way), or from the headers when no byte came."""
        if not self.cut or self.end_s is None:
            return None
        since = self.last_byte_s if self.last_byte_s is not None else (self.headers_s or 0.0)
        return max(0.0, self.end_s - since)

    def comment_interval_s(self) -> float | None:
        marks = self.comment_at_marks()
        gaps = [b - a for a, b in zip(marks, marks[1:])]
        return sum(gaps) / len(gaps) if gaps else None

    def comment_at_marks(self) -> list[float]:
        return [self.headers_s or 0.0, *self.comments_at_s] if self.comments_at_s else []


def _rpc_answer(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON-RPC answer of a POST, as JSON or as the `data:` of an SSE stream."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next((line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()),
                    "")
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


async def open_session(http: httpx.AsyncClient, url: str) -> tuple[int, str | None, str, str]:
    """initialize + initialized: (status, session id, protocol version, what went wrong or "")."""
    response = await http.post(url, json=INITIALIZE, headers={"accept": ACCEPT_POST})
    answer = _rpc_answer(response) if response.status_code == 200 else None
    if answer is None or "result" not in answer:
        return response.status_code, None, PROTOCOL_VERSION, f"initialize answered HTTP {response.status_code}"
    session = response.headers.get(SESSION_HEADER)
    version = str(answer["result"].get("protocolVersion", PROTOCOL_VERSION))
    headers = {"accept": ACCEPT_POST, VERSION_HEADER: version, **({SESSION_HEADER: session} if session else {})}
    await http.post(url, json=INITIALIZED, headers=headers)
    return 200, session, version, ""


async def measure_get_stream(url: str, wait_s: float, *, headers: dict[str, str] | None = None,
                             verify_tls: bool = True, stateless: bool = False, http2: bool = False) -> GetStream:
    """Open a session, hold its GET stream open and silent for up to `wait_s`, then delete the
    session (`stateless`: the 2026-07-28 revision's GET, no session). `http2`: speak HTTP/2, by
    ALPN over https, by prior knowledge (h2c) over http; a hop holds the headers only over HTTP/2
    (`nginx-http2-headers`, `mcp-held-headers`). Never raises for what the path did; `ended` says it."""
    stream = GetStream(wait_s=wait_s)
    timeout = httpx.Timeout(10.0, read=wait_s + 5.0)
    h2c = http2 and url.startswith("http://")
    async with httpx.AsyncClient(timeout=timeout, headers=headers or {}, verify=verify_tls, http2=http2,
                                 http1=not h2c) as http:
        if stateless:
            await _read(http, url, {"accept": "text/event-stream", VERSION_HEADER: STATELESS_VERSION}, stream, wait_s)
            return stream
        try:
            status, stream.session, version, wrong = await open_session(http, url)
        except httpx.HTTPError as exc:
            stream.ended = f"initialize failed: {type(exc).__name__}: {exc}"
            return stream
        if wrong:
            stream.status, stream.ended = status, wrong
            return stream
        get_headers = {"accept": "text/event-stream", VERSION_HEADER: version,
                       **({SESSION_HEADER: stream.session} if stream.session else {})}
        await _read(http, url, get_headers, stream, wait_s)
        if stream.session:
            try:
                await http.delete(url, headers={SESSION_HEADER: stream.session, VERSION_HEADER: version})
            except httpx.HTTPError:
                pass  # the session ends on the server's own terms then; the measurement is done
    return stream


async def _read(http: httpx.AsyncClient, url: str, headers: dict[str, str], stream: GetStream, wait_s: float) -> None:
    sent = time.monotonic()
    deadline = sent + wait_s
    try:
        async with http.stream("GET", url, headers=headers) as response:
            stream.status, stream.headers_s = response.status_code, time.monotonic() - sent
            stream.http_version = response.http_version
            if response.status_code != 200:
                stream.ended, stream.end_s = f"HTTP {response.status_code}", stream.headers_s
                return
            body = response.aiter_raw()
            pending = b""
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    stream.ended = "open at the end of the wait"
                    return
                try:
                    chunk = await _next(body, left)
                except TimeoutError:
                    stream.ended = "open at the end of the wait"
                    return
                now = time.monotonic() - sent
                if chunk is None:
                    stream.ended, stream.cut, stream.end_s = "closed by the path", True, now
                    return
                stream.first_byte_s = stream.first_byte_s if stream.first_byte_s is not None else now
                stream.last_byte_s = now
                pending += chunk
                *lines, pending = pending.split(b"\n")
                stream.comments_at_s += [now for line in lines if line.startswith(b":")]
                stream.events += sum(line.startswith(b"data:") for line in lines)
    except httpx.HTTPError as exc:  # a reset, or a chunked body cut short
        stream.end_s = time.monotonic() - sent
        # Cut by the path: after its 200, or before any header once the wait had begun (a refused
        # connection ends at once).
        # httpx's words: RemoteProtocolError is a body that ended without its last chunk (nginx at
        # proxy_read_timeout), ReadError the connection reset.
        stream.ended = ("cut mid-body (no last chunk)" if isinstance(exc, httpx.RemoteProtocolError)
                        else f"reset ({type(exc).__name__})")
        stream.cut = stream.status == 200 or (stream.status is None and stream.end_s >= HELD_AFTER_S)


async def _next(body: Any, timeout_s: float) -> bytes | None:
    """The next chunk within `timeout_s` (TimeoutError when none came), None at the end."""
    import anyio

    with anyio.fail_after(timeout_s):
        try:
            return await body.__anext__()
        except StopAsyncIteration:
            return None
