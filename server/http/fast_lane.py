"""The POST routes of every protocol (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`:
server/apis/table.py) served from uvicorn's request cycle, below the framework.

A burst of 1,000 arrivals is admitted by one event loop, so every microsecond a request spends
before its first token is paid 1,000 times by the last arrival. Through the ASGI stack a
completion crossed uvicorn's proxy-headers layer, the request checks, the body limit, the lab
guard, Starlette's error and exception middleware, the router and FastAPI's request wrapper, and
read its headers through Starlette's `Headers` (a decode per look-up): ~250 us of a request's
~1,300 in the profile of docs/performance.md. The lane does the same work once, in one pass:

    headers (one scan) -> checks (431, 415, 413) -> body -> Service.accept (the protocol's
    pydantic model, its own checks, lab token, admit) -> reply

and runs the reply (server/stream/sse_writer.py, server/stream/json_reply.py) on uvicorn's own
`receive` and `send`, so the stream itself is byte for byte the one the ASGI route sends. Everything
it does not take goes the ASGI way, unchanged: other routes and methods, a request carrying an
`X-Request-Id` (its record is the ASGI layer's, server/http/records.py), and every request of a
server with a layer around the app (`--cors-origin`, `--gzip-middleware`), on h11, or on a uvicorn
without the lane's hook (server/http/connections.py `lane_hook_missing`; said once at start).
tests/server/test_fast_lane.py sends one table of requests to a server with the lane and one
without, and compares the answers. The other protocols take the lane for the same reason: 400
4-token streams, 20 at once, on the synthetic engine (median of 5 rounds, 2026-12-06) cost 550 us
of server CPU each through the ASGI route and 475 through the lane for Responses, 500 and 400 for
Messages (475 and 325 for chat).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from server import errors, metrics
from server.apis.lab import LAB_HEADER
from server.apis.table import APIS, CHAT, Api
from server.config import ServerConfig
from server.errors import APIError, RequestTooLarge
from server.http.connections import lane_hook_missing
from server.http.cycle_extensions import release
from server.http.middleware import RequestChecks, content_type_refusal, send_error
from server.http.service import ClientLeft, Service, error_reply
from server.stream.json_reply import JSONCompletion
from server.stream.sse_writer import SSECompletion

log = logging.getLogger("server.app")

PATH = CHAT.path
# The lane's routes: each protocol's POST.
LANE_APIS: dict[str, Api] = {api.path: api for api in APIS.values()}
_TOKEN = b"x-lab-token"
_LAB = LAB_HEADER.lower().encode()
_ANTHROPIC_VERSION = b"anthropic-version"
_LAST_EVENT_ID = b"last-event-id"
_REQUEST_ID = b"x-request-id"
_CONTENT_LENGTH = b"content-length"
_CONTENT_TYPE = b"content-type"


class CompletionLane:
    """The chat route for uvicorn's httptools protocol (server/http/connections.py asks `takes`)."""

    def __init__(self, service: Service, config: ServerConfig) -> None:
        self.service = service
        self.checks = RequestChecks(None, config.max_header_bytes, config.max_headers)
        self.max_body_bytes = config.max_body_bytes
        self.body_timeout_s = config.body_timeout_s

    @staticmethod
    def for_config(service: Service, config: ServerConfig) -> "CompletionLane | None":
        """The lane, or None (said once, with why) where it is off: every request then goes
        the ASGI way, which answers alike (tests/server/test_fast_lane.py), only slower."""
        chosen = _chosen_off(config)
        reason = chosen or lane_hook_missing()
        if reason is None:
            return CompletionLane(service, config)
        # An option is the operator's choice: information. A uvicorn without the hook is not
        # what the server was built for: a warning.
        log.log(logging.INFO if chosen else logging.WARNING,
                "the completion lane is off: %s; POST %s goes the ASGI way", reason, PATH)
        return None

    @staticmethod
    def takes(scope: Any) -> bool:
        return scope["path"] in LANE_APIS and scope["method"] == "POST"

    async def serve(self, cycle: Any, app: Any) -> None:
        """One request, as uvicorn's `RequestResponseCycle.run_asgi` would run `app` (which
        runs a request the lane hands back)."""
        try:
            await self._serve(cycle, app)
        except BaseException as exc:
            if not cycle.response_started:
                log.exception("unhandled error on POST %s", cycle.scope["path"])
                metrics.REQUESTS.labels(status="500").inc()
                await _reply_error(cycle, APIError(500, "the server had an internal error",
                                                   type=errors.SERVER_ERROR, code="internal_error"))
            else:
                cycle.transport.close()
            if not isinstance(exc, Exception):
                raise
        else:
            if cycle.response_started and not cycle.response_complete and not cycle.disconnected:
                cycle.transport.close()  # a reply that ended mid-body (lab.abort_after_tokens)
        finally:
            cycle.on_response = _nothing  # as uvicorn's run_asgi does: no cycle left behind
            release(cycle)

    async def _serve(self, cycle: Any, app: Any) -> None:
        scope = cycle.scope
        arrived_at = time.monotonic()
        announced = token = last_event_id = lab_header = None
        kind: bytes | None = None
        versioned = False
        size = 0
        headers = scope["headers"]
        for name, value in headers:
            size += len(name) + len(value) + 4
            if name == _REQUEST_ID:
                # Its record lives in the ASGI layer (server/http/records.py): that way, whole.
                await cycle.run_asgi(app)
                return
            # The first of a repeated field, as Starlette's `Headers.get` reads it.
            if name == _TOKEN and token is None:
                token = value.decode("latin-1")
            elif name == _LAB and lab_header is None:
                lab_header = value.decode("latin-1")
            elif name == _LAST_EVENT_ID and last_event_id is None:
                last_event_id = value.decode("latin-1")
            elif name == _CONTENT_LENGTH and announced is None:
                announced = value
            elif name == _CONTENT_TYPE and kind is None:
                kind = value
            elif name == _ANTHROPIC_VERSION:
                versioned = True
        # RequestChecks' and BodySizeLimit's refusals, from the one scan above.
        refused = (self.checks.header_refusal(len(headers), size) or content_type_refusal(kind or b"")
                   or self._announced_too_large(announced))
        if refused is not None:
            await send_error(scope, cycle.send, refused)
            return
        api = LANE_APIS[scope["path"]]
        try:
            body = await self._body(cycle)
            if body is None:
                log.info("%s left before its request body was complete", _peer(scope))
                metrics.REQUESTS.labels(status=errors.CLIENT_CLOSED).inc()
                return
            parsed, job = await self.service.accept(api, body, token, arrived_at, cycle.receive,
                                                    versioned, lab_header)
        except RequestTooLarge as exc:
            await send_error(scope, cycle.send, exc)
            return
        except APIError as exc:
            refusal = error_reply(api, exc)
            metrics.REQUESTS.labels(status=str(refusal.status_code)).inc()
            await refusal(scope, cycle.receive, cycle.send)
            return
        except ClientLeft:
            log.info("%s left during lab.headers_delay_s", _peer(scope))
            return
        reply = SSECompletion(job, last_event_id) if parsed.stream else JSONCompletion(job)
        await reply(scope, cycle.receive, cycle.send)

    def _announced_too_large(self, announced: bytes | None) -> APIError | None:
        if announced is None:
            return None
        try:
            size = int(announced)
        except ValueError:
            return None
        return RequestTooLarge(self.max_body_bytes) if size > self.max_body_bytes else None

    async def _body(self, cycle: Any) -> bytes | None:
        """The whole body within --body-timeout-s (408 after it), at most --max-body-bytes (413);
        None when the client left first. Usually it came with the headers: no wait at all."""
        if not cycle.more_body and not cycle.disconnected:
            cycle.waiting_for_100_continue = False  # nothing left to ask for
            # As uvicorn's receive() does: a body over its 64 KiB buffer paused reading, and
            # a connection not read never shows its FIN (a departure in a silence went unheard,
            # the slot held to the stream's end: tests/server/test_fast_lane.py).
            cycle.flow.resume_reading()
            body = bytes(cycle.body)
            cycle.body = bytearray()
            if len(body) > self.max_body_bytes:
                raise RequestTooLarge(self.max_body_bytes)
            return body
        pieces: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout_s):  # no task, unlike wait_for
                while True:
                    message = await cycle.receive()
                    if message["type"] == "http.disconnect":
                        return None
                    piece = message.get("body", b"")
                    size += len(piece)
                    if size > self.max_body_bytes:
                        raise RequestTooLarge(self.max_body_bytes)
                    pieces.append(piece)
                    if not message.get("more_body", False):
                        return b"".join(pieces)
        except TimeoutError:
            raise APIError(408, f"the request body did not arrive within {self.body_timeout_s:g} s",
                           code="request_timeout", headers={"Connection": "close"}) from None


def _chosen_off(config: ServerConfig) -> str | None:
    """The server-wide option that turns the lane off, if any: a layer must see every request."""
    if config.http != "httptools":
        return "--http h11 (the lane runs on uvicorn's httptools protocol)"
    if config.cors_origins:
        return "--cors-origin (CORS answers preflights and adds headers to every response)"
    if config.gzip_middleware:
        return "--gzip-middleware (the gzip failure mode rewrites every body)"
    return None


def _nothing() -> None:
    pass


async def _reply_error(cycle: Any, error: APIError) -> None:
    """The route's error answer, as the app's APIError handler sends it (server/errors.py)."""
    await error.response()(cycle.scope, cycle.receive, cycle.send)


def _peer(scope: Any) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "a client"
