"""The measuring client's protocol: one request and its response on one connection, every socket
read numbered and timed where it happens (the public API is labs/client/http1.py).

Why not httpx: httpx hides socket reads (so a hop that coalesces events is invisible) and its
default pool silently caps at 100 connections.
Here each connection is an `asyncio.Protocol`: `data_received` is called once per `recv()` the
event loop makes, so every read is timed and numbered where it happens, with no task wake-up
in between (the streams API of `asyncio.open_connection` sits on the same transport, but its
buffer would merge reads that arrive while the loop is busy). `h11` parses the response.

What counts as what (see `labs.client.results.Outcome`):
- `reset`: the OS reported ECONNRESET / EPIPE / ECONNABORTED at any time, or the connection
  closed before a complete status line and headers (there is no HTTP response to judge).
- `truncated`: response headers arrived, then the connection closed (FIN) or the body ended
  without the protocol's terminal event (`[DONE]`, `response.completed`, `message_stop`). An
  orderly close in the middle of a chunk is still a FIN, so it is `truncated`; `body_complete`
  tells whether the HTTP framing itself was finished.
- `timeout`: `read_timeout_s` passed with no byte (measured like httpx's read timeout, from the
  request or the previous read), or the total deadline (from the call, connect included).
- Precedence when several apply: http-error, disconnected, error-in-band, complete (saw the
  terminal event), timeout, reset, truncated. A timeout after it is still `complete`.
Which protocol the events follow is `Options.api` (labs/client/apis/: its classifier, its headers).
"""

from __future__ import annotations

import asyncio
import math
import time
import zlib
from dataclasses import dataclass
from typing import Any, Literal, Mapping
from urllib.parse import urlencode, urlsplit

import h11

from labs.client.apis import DEFAULT_API, client_api
from labs.client.decoding import decoder_for
from labs.client.results import Event, StreamResult
from labs.client.sse import SSEParser

Mode = Literal["stream", "read-body"]
USER_AGENT = "streamlab-client/0.1"
SNIPPET_BYTES = 2048


@dataclass(frozen=True, slots=True)
class Options:
    """Client knobs. `accept_encoding=None` sends no Accept-Encoding header.

    `mode="read-body"` is a client that reads the whole body before it looks at it (a
    non-streaming call): every event is dispatched at the last byte, in the last read.
    `disconnect_after_events` (stream mode only) closes the socket (FIN) right after that many
    content events have been dispatched; the time is `disconnect_s`.
    `method="GET"` sends the request as EventSource does: no body, the JSON in the `request`
    query parameter (the server's GET form, server/http/event_source.py), a URL a cache can key on.

    The default Accept-Encoding is what httpx (and so the OpenAI Python SDK) sends, so a
    proxy that compresses will compress for this client as it would for a real one.
    """

    mode: Mode = "stream"
    read_timeout_s: float | None = 30.0
    total_timeout_s: float | None = 300.0
    connect_timeout_s: float | None = 10.0
    headers: Mapping[str, str] | None = None
    accept_encoding: str | None = "gzip, deflate"
    disconnect_after_events: int | None = None
    method: Literal["POST", "GET"] = "POST"
    # HTTP/2 over TLS (ALPN h2) with labs/client/http2.py; verify_tls=False accepts the lab's own
    # self-signed loopback certificate.
    http2: bool = False
    verify_tls: bool = True
    # An HTTP forward proxy ("http://host:port"): the client connects to it and sends the request
    # with an absolute-form target (`POST http://origin/path`), as a client with HTTP_PROXY set
    # does for an http:// URL. An https:// URL would need a CONNECT tunnel, which this client
    # does not make.
    proxy: str | None = None
    # The wire protocol (labs/client/apis: chat, responses, messages): how events are read, and
    # its fixed request headers (Messages' `anthropic-version`).
    api: str = DEFAULT_API


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int
    tls: bool
    path: str
    host_header: str

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"need an http(s) URL, got {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.hostname, port, tls, path, parts.netloc)


def sent_headers(opts: Options) -> dict[str, str]:
    """The caller's headers over the protocol's own (a caller's `x-api-key` replaces the default)."""
    own = client_api(opts.api).headers()
    named = {k.lower() for k in opts.headers or {}}
    return {**{k: v for k, v in own.items() if k.lower() not in named}, **(opts.headers or {})}


def request_bytes(target: Target, body: bytes, opts: Options) -> bytes:
    headers = [
        ("Host", target.host_header),
        ("User-Agent", USER_AGENT),
        ("Accept", "text/event-stream"),
    ]
    path = target.path if opts.proxy is None else f"http://{target.host_header}{target.path}"
    if opts.method == "GET":
        if body:  # EventSource's form; an empty body is a plain GET (a Responses resume)
            path += ("&" if "?" in path else "?") + urlencode({"request": body.decode()})
        body = b""
    else:
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if opts.accept_encoding:
        headers.append(("Accept-Encoding", opts.accept_encoding))
    taken = {k.lower() for k, _ in headers}
    for k, v in sent_headers(opts).items():
        if k.lower() in taken:
            headers = [(hk, hv) for hk, hv in headers if hk.lower() != k.lower()]
        headers.append((k, v))
    conn = h11.Connection(h11.CLIENT)
    return b"".join(
        conn.send(ev)  # type: ignore[misc]
        for ev in (h11.Request(method=opts.method, target=path, headers=headers),
                   *([h11.Data(data=body)] if body else []), h11.EndOfMessage())
    )


class Exchange(asyncio.Protocol):
    """One request/response on one connection; fills a StreamResult as bytes arrive."""

    def __init__(self, result: StreamResult, opts: Options, deadline: float) -> None:
        self.r = result
        self.opts = opts
        self.deadline = deadline  # perf_counter() value; inf for none
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.h11 = h11.Connection(h11.CLIENT)
        self.parser = SSEParser()
        self.api = client_api(opts.api)
        self.transport: asyncio.Transport | None = None
        self.decoder: Any = None
        self.t0 = 0.0
        self.last = 0.0  # perf_counter() of the request write or the latest read
        self.timer: asyncio.TimerHandle | None = None
        self.finished = False
        self.snippet = bytearray()
        self.held: list[bytes] = []  # read-body mode: the body, looked at only at the end
        self.parts: list[str] = []
        self.content_n = 0
        self.inband_error = False

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: bytes) -> None:
        assert self.transport is not None
        # t = 0 is taken before the write: if another thread holds the GIL while the write
        # returns, a clock read after it could land after the response had already arrived.
        self.t0 = self.last = time.perf_counter()
        try:
            self.transport.write(request)
        except (OSError, RuntimeError) as exc:
            # The server closed the connection before we could write (uvloop raises
            # RuntimeError on a closed transport): the stream never started, like a reset.
            self.r.error = f"{type(exc).__name__}: {exc}"
            self._finish("reset")
            return
        self._arm()

    def note_read(self, now: float) -> float:
        """Count one socket read that returned data at `now`; its time since t = 0."""
        r = self.r
        r.reads += 1
        t = now - self.t0
        if r.ttfb_s is None:
            r.ttfb_s = t
        r.e2e_s = t
        self.last = now
        return t

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        wall = time.time()
        if self.finished:
            return
        r = self.r
        t = self.note_read(now)
        try:
            self.h11.receive_data(data)
            self._drain(t, r.reads, wall)
        except h11.RemoteProtocolError as exc:
            r.error = f"HTTP protocol error: {exc}"
            self._finish("reset" if r.status is None else "eof")

    def eof_received(self) -> bool:
        if not self.finished:
            try:  # a close-delimited body (HTTP/1.0) ends here; h11 emits its EndOfMessage
                self.h11.receive_data(b"")
                self._drain(self.r.e2e_s or 0.0, self.r.reads, time.time())
            except h11.RemoteProtocolError:
                pass  # framing incomplete (mid-chunk): body_complete stays False
            if not self.finished:
                self._finish("eof")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.finished:
            return
        if exc is None:
            self._finish("eof")
        else:
            self.r.error = f"{type(exc).__name__}: {exc}"
            self._finish("reset")

    # ---- response handling -----------------------------------------------------------------

    def _drain(self, t: float, read: int, wall: float) -> None:
        r = self.r
        while not self.finished:
            ev = self.h11.next_event()
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                return
            kind = type(ev)
            if kind is h11.Data:
                self._body(ev.data, t, read, wall)  # type: ignore[union-attr]
            elif kind is h11.Response:
                r.status = ev.status_code  # type: ignore[union-attr]
                r.headers_s = t
                r.http_version = ev.http_version.decode()  # type: ignore[union-attr]
                headers: dict[str, str] = {}
                for name, value in ev.headers:  # type: ignore[union-attr]
                    k, v = name.decode("latin-1"), value.decode("latin-1")
                    headers[k] = f"{headers[k]}, {v}" if k in headers else v
                r.headers = headers
                enc = headers.get("content-encoding", "").strip().lower() or None
                r.content_encoding = enc
                self.decoder = decoder_for(enc)
            elif kind is h11.EndOfMessage:
                r.body_complete = True
                self._finish("end")
            elif kind is h11.ConnectionClosed:
                return
            # InformationalResponse (1xx) needs nothing

    def _body(self, raw: bytes, t: float, read: int, wall: float) -> None:
        r = self.r
        r.wire_bytes += len(raw)
        data = raw
        if self.decoder is not None:
            try:
                data = self.decoder.decompress(raw)
            except zlib.error as exc:
                r.error = f"cannot decode {r.content_encoding} body: {exc}"
                self._finish("eof")
                return
        r.body_bytes += len(data)
        if r.status is not None and r.status >= 400:
            self.snippet += data[: max(0, SNIPPET_BYTES - len(self.snippet))]
        elif self.opts.mode == "read-body":
            self.held.append(data)
        elif data:
            self._dispatch(self.parser.feed(data), t, read, wall)

    def _dispatch(self, items: list[tuple[str, str, str | None]], t: float, read: int, wall: float) -> None:
        r = self.r
        append = r.events.append
        classify, beats = self.api.classify, self.api.heartbeat_events
        for item_kind, payload, name in items:
            if item_kind == "comment":
                r.heartbeats += 1
                append(Event(t, read, "comment", payload))
                continue
            kind, text, finish, sent_at, extra = classify(payload, name)
            append(Event(t, read, kind, text, None if sent_at is None else wall - sent_at))
            if name in beats:  # a named keep-alive (Anthropic's `event: ping`): not a token
                r.heartbeats += 1
            if finish:
                r.finish_reason = finish
            if kind == "content":
                self.parts.append(text)
                self.content_n += 1
                if r.ttft_s is None:
                    r.ttft_s = t
                limit = self.opts.disconnect_after_events
                if limit is not None and self.content_n >= limit and self.opts.mode == "stream":
                    r.disconnect_s = time.perf_counter() - self.t0
                    self._finish("left")
                    return
            elif kind == "done":
                r.saw_done = True
                r.usage = extra or r.usage  # Responses: the usage is in `response.completed`
            elif kind == "error":
                if not self.inband_error:
                    r.error = text
                self.inband_error = True
            elif kind == "usage" or (kind == "finish" and extra):  # Messages: in `message_delta`
                r.usage = extra

    # ---- timeouts and the end ----------------------------------------------------------------

    def _arm(self) -> None:
        due = self.deadline
        if self.opts.read_timeout_s is not None:
            due = min(due, self.last + self.opts.read_timeout_s)
        if due < math.inf:
            # One timer per exchange, re-armed lazily when it fires: cheaper than cancelling
            # and re-creating a timer on every read at 20,000 reads/s.
            self.timer = self.loop.call_later(max(0.0, due - time.perf_counter()), self._check)

    def _check(self) -> None:
        self.timer = None
        if self.finished:
            return
        now = time.perf_counter()
        rt = self.opts.read_timeout_s
        if now >= self.deadline:
            self.r.error = self.r.error or "total deadline reached"
            self._finish("timeout")
        elif rt is not None and now - self.last >= rt:
            self.r.error = self.r.error or f"read timeout: no byte for {rt:g} s"
            self._finish("timeout")
        else:
            self._arm()

    def expire(self, reason: str) -> None:
        if not self.finished:
            self.r.error = self.r.error or reason
            self._finish("timeout")

    def _finish(self, cause: str) -> None:
        if self.finished:
            return
        self.finished = True
        r = self.r
        if self.t0:
            r.end_s = time.perf_counter() - self.t0
        if self.timer is not None:
            self.timer.cancel()
        if self.held:
            # read-body: the application sees every event at once, when the body has ended
            # (at the last byte), all in the read that ended it.
            body, self.held = b"".join(self.held), []
            self._dispatch(self.parser.feed(body), r.e2e_s or 0.0, r.reads, time.time())
        r.text = "".join(self.parts)
        if r.status is not None and r.status >= 400:
            r.outcome = "http-error"
            r.body_snippet = self.snippet.decode("utf-8", "replace")
            r.error = f"HTTP {r.status}" + (f" ({r.error})" if r.error else "")
        elif cause == "left":
            r.outcome = "disconnected"
        elif self.inband_error:
            r.outcome = "error-in-band"
        elif r.saw_done:
            r.outcome = "complete"
        elif cause == "timeout":
            r.outcome = "timeout"
        elif cause == "reset" or r.status is None:
            r.outcome = "reset"
            if r.status is None and r.error is None:
                r.error = "connection closed before the response headers"
        else:
            r.outcome = "truncated"
        if self.transport is not None and not self.transport.is_closing():
            if cause in ("timeout", "reset"):
                self.transport.abort()
            else:
                self.transport.close()
                if self.transport.get_extra_info("ssl_object") is not None:
                    # TLS: the close_notify is sent; the FIN follows at once, as a browser or an
                    # SDK closes. asyncio would wait for the server's close_notify first (30 s,
                    # or until the socket is collected once the loop has stopped), and a proxy
                    # that does not read a client while it streams to it would not see the
                    # departure (measured: nginx over HTTP/1.1, not seen within 5 s).
                    self.transport.abort()
        if not self.done.done():
            self.done.set_result(None)
