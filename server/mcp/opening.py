"""`--open-comment`: an `: open` SSE comment on every SSE response right after its headers.

A hop that holds a response's headers until its first body byte (nginx before 1.23 over HTTP/2:
`nginx-http2-headers`) holds the standalone GET stream's 200 until the server's first notification
or keep-alive, because the SDK sends it no byte before them: mcp 2.3 mints a priming event on
resumable POST streams and replays only (`_mint_priming_event`), never on a GET without
`Last-Event-ID`. A comment line is ignored by every SSE parser (the spec's "lines starting with a
colon"), so it changes nothing the client reads. ASGI middleware around the SDK's app: the
protocol stays the SDK's, this only adds one body chunk after the headers it sent.
https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream
"""
from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

OPEN_COMMENT = b": open\n\n"
EVENT_STREAM = b"text/event-stream"


class OpenComment:
    """Writes OPEN_COMMENT right after the headers of every `text/event-stream` response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.start" and \
                    dict(message.get("headers", [])).get(b"content-type", b"").startswith(EVENT_STREAM):
                await send({"type": "http.response.body", "body": OPEN_COMMENT, "more_body": True})

        await self.app(scope, receive, sending)
