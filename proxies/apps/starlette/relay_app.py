"""An SSE relay written the way AI gateways' Python relays are: a Starlette app under uvicorn that
sends every request on to the upstream with httpx's AsyncClient and streams the answer back in a
StreamingResponse, forwarding the body as its `mode` says (`modes.py`).

    STREAMLAB_UPSTREAM=http://127.0.0.1:8000 STREAMLAB_RELAY_MODE=iter-raw \
        python -m uvicorn proxies.apps.starlette.relay_app:app --port 3000

Any method and path (chat, Responses, Messages alike), the status and every end-to-end header
pass through; only the hop-by-hop headers are the relay's own (RFC 9110 section 7.6.1).
"""
from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from proxies.apps.starlette.modes import DEFAULT_CHUNK_BYTES, MODES

UPSTREAM = os.environ.get("STREAMLAB_UPSTREAM", "http://127.0.0.1:8000")
MODE = MODES[os.environ.get("STREAMLAB_RELAY_MODE", "lines")]
CHUNK_BYTES = int(os.environ.get("STREAMLAB_RELAY_CHUNK_BYTES", DEFAULT_CHUNK_BYTES))
# Set by the connection itself, never forwarded (RFC 9110 7.6.1); content-length too, since a
# mode may change the body's length, and host, which httpx sets for the upstream.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade", "content-length", "host"})
# The relay never cuts a silence itself (no read timeout): the timeouts a scenario measures are
# the proxies' in front of it, as in the reports, whose relays waited minutes.
TIMEOUT = httpx.Timeout(10.0, read=None)


def _end_to_end(headers: httpx.Headers | list[tuple[str, str]]) -> list[tuple[str, str]]:
    items = headers.multi_items() if isinstance(headers, httpx.Headers) else headers
    return [(name, value) for name, value in items if name.lower() not in HOP_BY_HOP]


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with httpx.AsyncClient(base_url=UPSTREAM, timeout=TIMEOUT) as client:
        app.state.client = client
        yield


async def relay(request: Request) -> StreamingResponse:
    client: httpx.AsyncClient = request.app.state.client
    upstream_request = client.build_request(
        request.method, request.url.path, params=request.url.query,
        headers=_end_to_end(list(request.headers.items())), content=await request.body())
    upstream = await client.send(upstream_request, stream=True)
    # The mode is how the relay handles event streams; any other body (a JSON answer, an error)
    # passes as it is read, as the reports' relays pass them.
    streamed = upstream.headers.get("content-type", "").startswith("text/event-stream")
    body = MODE.forward(upstream, CHUNK_BYTES) if streamed else upstream.aiter_raw()
    # The generator reads the upstream as the client is written to; when the client leaves,
    # Starlette stops iterating and the background task closes the upstream response.
    return StreamingResponse(body, status_code=upstream.status_code,
                             headers=dict(_end_to_end(upstream.headers)),
                             background=BackgroundTask(upstream.aclose))


METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
app = Starlette(routes=[Route("/{path:path}", relay, methods=METHODS)], lifespan=lifespan)
