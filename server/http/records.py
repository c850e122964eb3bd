"""A short record of each request that carries an `X-Request-Id`, served at `GET /lab/requests/{id}`.

`labs probe` reads the cost of a departure from the origin itself, through the user's path: it
sends a request id, leaves after a few tokens, then asks this endpoint how many tokens the engine
made, how many of them after the server saw the client go, and when that was. The timings are
relative to the request's arrival, so a caller on another machine needs no shared clock.

    records.install(app)                                   # the store and the GET route
    return records.track(request, SSECompletion(job))      # in the chat-completions route

The store is bounded (the oldest records go first) and keeps only requests that asked for a
record, so it costs nothing on ordinary traffic. Access beyond loopback is the lab token's job
(every `/lab/` endpoint), not this module's.
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from server import errors
from server.http.cycle_extensions import without_body_send

REQUEST_ID_HEADER = "x-request-id"
MAX_RECORDS = 1024
# Ids are echoed in a header and used as a path segment: keep them short and plain.
_VALID_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass
class RequestRecord:
    """What the server saw of one request. Times are seconds after the request arrived."""

    id: str
    stream: bool
    arrived_at: float  # wall clock (time.time()), for people reading it
    api: str = "chat"  # the protocol it came in (server/apis/table.py): chat, responses, messages
    outcome: str = "running"  # running | complete | client-gone | ended-early
    finished: bool = False
    tokens_generated: int = 0
    tokens_after_disconnect: int = 0  # tokens the engine produced after the server saw the client go
    client_gone_after_s: float | None = None  # when the server saw the client leave (None: never)
    headers_after_s: float | None = None  # when the response headers left
    first_token_after_s: float | None = None  # when the first token's bytes left (after any queue)
    ended_after_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class RecordStore:
    """The last MAX_RECORDS records, by id (thread-safe: the engine may run in a thread)."""

    def __init__(self, limit: int = MAX_RECORDS) -> None:
        self.limit = limit
        self._records: OrderedDict[str, RequestRecord] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, request_id: str, stream: bool, api: str = "chat") -> RequestRecord:
        record = RequestRecord(id=request_id, stream=stream, arrived_at=time.time(), api=api)
        with self._lock:
            self._records.pop(request_id, None)  # a reused id describes the latest request
            self._records[request_id] = record
            while len(self._records) > self.limit:
                self._records.popitem(last=False)
        return record

    def get(self, request_id: str) -> RequestRecord | None:
        with self._lock:
            return self._records.get(request_id)

    def __len__(self) -> int:
        return len(self._records)


def request_id(request: Request) -> str | None:
    value = request.headers.get(REQUEST_ID_HEADER)
    return value if value is not None and _VALID_ID.fullmatch(value) else None


class _Tracked(Response):
    """Runs the completion response unchanged and notes, on the way, what its record needs."""

    def __init__(self, inner: Any, record: RequestRecord) -> None:
        self.inner = inner
        self.record = record
        self.status_code = getattr(inner, "status_code", 200)
        self.background = None
        self.raw_headers = []
        self._started = time.monotonic()
        self._complete = False
        self._tokens_at_departure: int | None = None

    def _tokens(self) -> int:
        generation = getattr(getattr(self.inner, "job", None), "generation", None)
        return int(getattr(generation, "completion_tokens", 0) or 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        record = self.record

        async def watched_receive() -> Message:
            message = await receive()
            # After the last byte the server itself reports a disconnect: that is no departure.
            if (message["type"] == "http.disconnect" and not self._complete
                    and record.client_gone_after_s is None):
                record.client_gone_after_s = time.monotonic() - self._started
                self._tokens_at_departure = self._tokens()
            return message

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.headers_after_s = time.monotonic() - self._started
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", record.id.encode()))
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                if record.first_token_after_s is None and self._tokens() > 0:
                    record.first_token_after_s = time.monotonic() - self._started
                if not message.get("more_body", False):
                    self._complete = True
            await send(message)

        try:
            await self.inner(without_body_send(scope), watched_receive, watched_send)
        finally:
            tokens = self._tokens()
            record.tokens_generated = tokens
            if self._tokens_at_departure is not None:
                record.tokens_after_disconnect = max(0, tokens - self._tokens_at_departure)
                record.outcome = "client-gone"
            else:
                record.outcome = "complete" if self._complete else "ended-early"
            record.ended_after_s = time.monotonic() - self._started
            record.finished = True


def track(request: Request, response: Any, api: str = "chat") -> Any:
    """The response, recorded when the request carries a valid X-Request-Id (else unchanged)."""
    store: RecordStore | None = getattr(request.app.state, "records", None)
    rid = request_id(request)
    if store is None or rid is None:
        return response
    record = store.open(rid, stream=response.__class__.__name__.startswith("SSE"), api=api)
    return _Tracked(response, record)


router = APIRouter()


@router.get("/lab/requests/{request_id}")
async def get_record(request_id: str, request: Request) -> JSONResponse:
    store: RecordStore = request.app.state.records
    record = store.get(request_id)
    if record is None:
        return JSONResponse(errors.error_body(
            f"no record of request {request_id!r}: the server keeps the last {store.limit} requests "
            f"that were sent with an X-Request-Id header", "invalid_request_error",
            code="record_not_found"), status_code=404)
    return JSONResponse(record.to_json())


def install(app: FastAPI, limit: int = MAX_RECORDS) -> None:
    """Give the app a record store and the route that serves it."""
    app.state.records = RecordStore(limit)
    app.include_router(router)
