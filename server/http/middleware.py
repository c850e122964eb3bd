"""Pure ASGI middleware: the request checks (header block, Content-Type), the body limit, and the
gzip failure mode.

Pure ASGI (not BaseHTTPMiddleware) so that nothing sits between a stream and the socket: each
body message of a response passes straight through.
"""
from __future__ import annotations

import zlib

from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server import metrics
from server.errors import APIError, RequestTooLarge
from server.http.cycle_extensions import without_body_send

# Paths whose POST bodies are JSON (the API and the lab endpoints).
JSON_PATH_PREFIXES = ("/v1/", "/lab/")


class RequestChecks:
    """Before any route: a parsed header block over the limits gets 431 (server/http/connections.py
    bounds it while it arrives), and a POST to the API whose Content-Type is not
    application/json gets 415. The second is what keeps a web page from starting generations on
    a server on the user's loopback: a page may send text/plain or a typeless body cross-site
    without asking (no CORS preflight), never application/json."""

    def __init__(self, app: ASGIApp, max_header_bytes: int, max_headers: int) -> None:
        self.app = app
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            error = self.check(scope)
            if error is not None:
                await send_error(scope, send, error)
                return
        await self.app(scope, receive, send)

    def check(self, scope: Scope) -> APIError | None:
        headers = scope.get("headers", ())
        size = sum(len(name) + len(value) + 4 for name, value in headers)
        error = self.header_refusal(len(headers), size)
        if error is None and scope.get("method") == "POST" and scope.get("path", "").startswith(JSON_PATH_PREFIXES):
            error = content_type_refusal(next((v for n, v in headers if n == b"content-type"), b""))
        return error

    def header_refusal(self, count: int, size: int) -> APIError | None:
        """431 for a parsed block of `count` fields and `size` bytes (each `name: value\\r\\n`)."""
        if count > self.max_headers:
            return APIError(431, f"the request has {count} header fields: the server's "
                            f"limit is {self.max_headers}", code="request_headers_too_large")
        if size > self.max_header_bytes:
            return APIError(431, f"the request headers are {size} bytes: the server's limit is "
                            f"{self.max_header_bytes}", code="request_headers_too_large")
        return None


def content_type_refusal(kind: bytes) -> APIError | None:
    """415 unless a JSON POST's Content-Type (`kind`, b"" when absent) is application/json."""
    media = kind.split(b";", 1)[0].strip().lower()
    if media == b"application/json":
        return None
    shown = kind.decode("latin-1")[:100] or "none"
    return APIError(415, f"the request body must be application/json (Content-Type was {shown})",
                    param="Content-Type", code="unsupported_media_type")


class BodySizeLimit:
    """413 for request bodies over `max_bytes`, whether announced (Content-Length, rejected before
    a byte is read) or not (chunked transfer encoding, counted as it arrives)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    announced = 0
                if announced > self.max_bytes:
                    await send_error(scope, send, RequestTooLarge(self.max_bytes))
                    return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # The app's APIError handler answers 413 (caught below if it does not).
                    raise RequestTooLarge(self.max_bytes)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except RequestTooLarge as exc:
            if started:
                raise
            await send_error(scope, send, exc)


async def send_error(scope: Scope, send: Send, error: APIError) -> None:
    if scope.get("path", "").startswith("/v1/chat"):  # as the app's own error handler counts
        metrics.REQUESTS.labels(status=str(error.status)).inc()
    body = error.response().body  # the bytes the app's error handler sends for it
    await send({"type": "http.response.start", "status": error.status,
                # The rest of the body is not read: the connection cannot be reused.
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BufferedGzip:
    """Failure mode `server-gzip-middleware`: gzip every response, SSE included, the way a
    middleware built on `gzip.GzipFile` (or a zlib stream never flushed) does it.

    zlib emits output only when its internal buffer fills, so a compressed stream leaves in lumps
    (tens of KB of events at a time) and the client's parser waits for each lump. The fix is
    `exclude_sse`: text/event-stream passes through uncompressed.
    Note: Starlette's own GZipMiddleware (1.x) sync-flushes every chunk and does stream, at some
    cost in ratio; `--gzip-sync-flush` selects it to show that nuance.
    """

    def __init__(self, app: ASGIApp, exclude_sse: bool = False, minimum_size: int = 500) -> None:
        self.app = app
        self.exclude_sse = exclude_sse
        self.minimum_size = minimum_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(
                name == b"accept-encoding" and b"gzip" in value
                for name, value in scope.get("headers", ())):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        compressor: "zlib._Compress | None" = None
        passthrough = False

        async def gzip_send(message: Message) -> None:
            nonlocal start, compressor, passthrough
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or passthrough:
                await send(message)
                return
            body, more = message.get("body", b""), message.get("more_body", False)
            if start is not None:  # the first body message decides
                headers = [(n.lower(), v) for n, v in start.get("headers", ())]
                kind = dict(headers).get(b"content-type", b"")
                if ((self.exclude_sse and kind.startswith(b"text/event-stream"))
                        or b"content-encoding" in dict(headers)
                        or (not more and len(body) < self.minimum_size)):
                    passthrough = True
                    await send(start)
                    start = None
                    await send(message)
                    return
                headers = [(n, v) for n, v in headers if n != b"content-length"]
                headers += [(b"content-encoding", b"gzip"), (b"vary", b"accept-encoding")]
                await send({**start, "headers": headers})
                start = None
                compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            assert compressor is not None
            out = compressor.compress(body)  # no flush: output waits for zlib's buffer
            if not more:
                out += compressor.flush()
            if out or not more:
                await send({"type": "http.response.body", "body": out, "more_body": more})

        await self.app(scope, receive, gzip_send)


def gzip_everything(app: ASGIApp, exclude_sse: bool, sync_flush: bool = False) -> ASGIApp:
    """The gzip middleware of `--gzip-middleware`: buffered (the failure) unless `sync_flush`
    (Starlette's GZipMiddleware, which flushes each chunk). `exclude_sse` is the fix for both."""
    if sync_flush:
        excluded = DEFAULT_EXCLUDED_CONTENT_TYPES if exclude_sse else ()
        return _SeesBodies(GZipMiddleware(app, minimum_size=500, exclude_content_types=excluded))
    return _SeesBodies(BufferedGzip(app, exclude_sse=exclude_sse))


class _SeesBodies:
    """Around a layer that transforms body messages: every body write must pass through it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(without_body_send(scope), receive, send)
