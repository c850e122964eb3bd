"""uvicorn's HTTP protocols, with the limits a slow or hostile client meets before any app code.

uvicorn creates one protocol instance per accepted connection, so this is where to:
* count the TCP connections accepted (the upstream-keepalive lab counts a proxy's connections;
  an ASGI middleware only sees requests, not connections);
* bound the time to receive a request's headers: a connection silent since it opened is closed,
  a header block still incomplete after `header_timeout_s` gets 408 (slowloris). uvicorn's own
  keep-alive timer only covers the idle time between requests;
* bound the header block's size while it arrives (431): httptools and h11 buffer an incomplete
  block without limit (hundreds of MB), so counting after parsing (server/http/middleware.py, which
  also counts the fields) is too late for memory;
* let every request on a pipelined connection see its client leave. httptools keeps only the
  newest request as "the" cycle, so a departure reached the second stream only and the first
  ran on for nobody; and uvicorn pauses reading while a pipelined request waits, so the FIN
  was not even read. Here every open cycle hears of the departure, and reading goes on while at
  most one request waits (its body is still bounded by uvicorn's flow control; under h11, up
  to one header block's worth of it).
"""
from __future__ import annotations

import asyncio
import inspect
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from server.errors import error_body
from server.http.cycle_extensions import Gather, WriteNow, departure_of, offer_abort, release
from server.http.lingering import LingeringTransport
from server.metrics import HTTP_CONNECTIONS
from server.stream.extensions import DEPARTURE_EXTENSION, GATHER_EXTENSION, WRITE_NOW_EXTENSION

HttpImpl = Literal["httptools", "h11"]

log = logging.getLogger("server.connections")

@dataclass(frozen=True)
class HttpLimits:
    max_header_bytes: int = 32 * 1024
    header_timeout_s: float = 15.0


def raw_error(status: int, reason: bytes, message: str, code: str) -> bytes:
    """A complete HTTP/1.1 error response in the OpenAI shape, closing the connection."""
    body = json.dumps(error_body(message, "invalid_request_error", None, code)).encode()
    return b"".join([b"HTTP/1.1 %d %s\r\n" % (status, reason),
                     b"content-type: application/json\r\n",
                     b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n", body])


class _Limited:
    """What both protocols share: the connection count, the header timer, the size bound."""

    limits: HttpLimits = HttpLimits()
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def connection_made(self, transport: asyncio.Transport) -> None:
        HTTP_CONNECTIONS.inc()
        # Every close, uvicorn's and the lane's, lingers while a request is still arriving.
        super().connection_made(LingeringTransport(transport, self, self.loop))  # type: ignore[misc]
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport.lingering:  # type: ignore[attr-defined]
            transport.discard(data)  # type: ignore[attr-defined]
            return
        super().data_received(data)  # type: ignore[misc]

    def request_unread(self) -> bool:
        """Whether the client may still be sending the request being answered."""
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout_s,
                                                      self._header_timeout)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _responding(self) -> bool:
        cycle = getattr(self, "cycle", None)
        return cycle is not None and not cycle.response_complete

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._responding():
            # A pipelined request trickling in behind a stream: its clock starts when the
            # stream ends, so a long answer never makes the next request time out.
            self._arm_header_timer()
            return
        if self._header_bytes or self._partial_headers():
            log.info("%s: request headers incomplete after %g s: 408", self._peer(),
                     self.limits.header_timeout_s)
            self._refuse(408, b"Request Timeout", "the request headers did not arrive within "
                         f"{self.limits.header_timeout_s:g} s", "request_timeout")
        else:  # silent since it opened (or since its last response, if keep-alive missed it)
            self.transport.close()

    def _count_header_bytes(self, count: int) -> bool:
        """Add bytes of an incomplete header block; False (and 431 sent) when over the limit."""
        self._header_bytes += count
        if self._header_bytes <= self.limits.max_header_bytes:
            return True
        log.info("%s: request header block over %d bytes: 431", self._peer(),
                 self.limits.max_header_bytes)
        self._refuse(431, b"Request Header Fields Too Large", "the request headers are larger "
                     f"than the server's limit of {self.limits.max_header_bytes} bytes",
                     "request_headers_too_large")
        return False

    def _refuse(self, status: int, reason: bytes, message: str, code: str) -> None:
        self._disarm_header_timer()
        self.transport.write(raw_error(status, reason, message, code))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer to a request it cannot parse, in the shape every other error has.
        self._refuse(400, b"Bad Request", f"invalid HTTP request: {msg}", "invalid_http_request")

    def _peer(self) -> str:
        client = getattr(self, "client", None)
        return f"{client[0]}:{client[1]}" if client else "a client"

    def _partial_headers(self) -> bool:
        return False


def _address(info: Any) -> tuple[str, int] | None:
    if isinstance(info, (tuple, list)) and len(info) >= 2:
        return (str(info[0]), int(info[1]))
    return None


class _LeanHttpTools(HttpToolsProtocol):
    """uvicorn's connection_made, with the addresses read from the transport's own extras:
    uvicorn asks for a socket object first and calls getsockname() and getpeername() on it,
    23 us per connection here against 5 us (measured with uvloop), paid by every arrival of a
    burst."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.connections.add(self)
        self.transport = transport
        self.flow = FlowControl(transport)
        sockname = transport.get_extra_info("sockname")
        self.server = (sockname, None) if isinstance(sockname, str) else _address(sockname)
        self.client = _address(transport.get_extra_info("peername"))
        self.scheme = "https" if transport.get_extra_info("sslcontext") else "http"


# The completion lane's hook (server/http/fast_lane.py): uvicorn's httptools protocol starts every
# request's task in `_start_asgi_task(cycle, app)`, from on_headers_complete and, for a pipelined
# request, from on_response_complete. In that shape from uvicorn 0.45.0 (its sources read: 0.30.0,
# 0.35.0 to 0.55.0); before it, both created the task inline, and an override went uncalled.
LANE_HOOK = "_start_asgi_task"
_LANE_HOOK_CALLERS = ("on_headers_complete", "on_response_complete")


def lane_hook_missing(protocol: type = HttpToolsProtocol) -> str | None:
    """Why this uvicorn's httptools protocol cannot carry the lane; None when it can."""
    hook = getattr(protocol, LANE_HOOK, None)
    where = f"uvicorn {uvicorn.__version__}'s HttpToolsProtocol"
    if not inspect.isfunction(hook):
        return f"{where} has no {LANE_HOOK}() (the lane needs uvicorn >= 0.45)"
    parameters = list(inspect.signature(hook).parameters)
    if parameters != ["self", "cycle", "app"]:
        return f"{where} has {LANE_HOOK}({', '.join(parameters)}), not (self, cycle, app)"
    for caller in _LANE_HOOK_CALLERS:
        code = getattr(getattr(protocol, caller, None), "__code__", None)
        if code is None or LANE_HOOK not in code.co_names:
            return f"{where}.{caller}() does not call {LANE_HOOK}()"
    return None


def _released_after(app: Any, cycle: Any) -> Any:
    """`app` for one request the ASGI way, the cycle released when it returns (as the lane
    releases its own: server/http/cycle_extensions.py `release`)."""
    async def run(scope: Any, receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        finally:
            release(cycle)
    return run


class LimitedHttpTools(_Limited, _LeanHttpTools):
    # The chat route below the framework (server/http/fast_lane.py): set by protocol_class.
    lane: Any = None

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        lane = self.lane
        if lane is None or app is not self.app or not lane.takes(cycle.scope):
            super()._start_asgi_task(cycle, _released_after(app, cycle))
            return
        task = self.loop.create_task(lane.serve(cycle, app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._in_headers = False
        self._begun = 0
        self._open_cycles: list[Any] = []
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        begun, was_in_headers = self._begun, self._in_headers
        super().data_received(data)
        if self.transport.is_closing() or not self._in_headers:
            return
        # A chunk wholly inside one header block counts whole; the chunk a block began in is
        # bounded by the read size, and server/http/middleware.py counts the parsed block exactly.
        if was_in_headers and begun == self._begun:
            self._count_header_bytes(len(data))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._begun += 1
        self._header_bytes = 0
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._disarm_header_timer()
        offer_abort(self.scope, self.transport)
        super().on_headers_complete()
        if self.cycle is not None:
            # The cycle's task has not run yet: the app starts with the extension.
            offer_abort(self.cycle.scope, self.transport, self.cycle.send)
            extensions = self.cycle.scope["extensions"]
            extensions[DEPARTURE_EXTENSION] = departure_of(self.cycle)
            extensions[GATHER_EXTENSION] = Gather(self.cycle)
            extensions[WRITE_NOW_EXTENSION] = WriteNow(self.cycle)
            self._open_cycles = [c for c in self._open_cycles if not c.response_complete]
            self._open_cycles.append(self.cycle)
        if len(self.pipeline) == 1:
            # uvicorn paused reading for the waiting request; go on reading, so that the
            # client's FIN is seen while the first stream runs. A third request pauses again.
            self.flow.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        departed = []
        for cycle in self._open_cycles:
            if not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
                departed.append(getattr(cycle, "streamlab_departure", None))
        self._open_cycles = []
        super().connection_lost(exc)
        for callback in departed:
            if callback is not None:
                try:
                    callback()
                except Exception:  # one stream's bug must not break the others' departure
                    log.exception("%s: a departure callback failed", self._peer())

    def _partial_headers(self) -> bool:
        return self._in_headers

    def request_unread(self) -> bool:
        cycle = self.cycle
        return self._in_headers or (cycle is not None and cycle.more_body and not cycle.disconnected)


class LimitedH11(_Limited, H11Protocol):
    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None:  # its task has not run yet: it starts with the extension
            offer_abort(self.cycle.scope, self.transport, self.cycle.send)
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE:
            pending = len(self.conn.trailing_data[0])
            if pending:
                self._arm_header_timer()
                self._header_bytes = 0
                self._count_header_bytes(pending)
            return
        self._disarm_header_timer()
        self._header_bytes = 0
        if (self.conn.their_state is h11.DONE and self.conn.our_state is not h11.DONE
                and len(self.conn.trailing_data[0]) <= self.limits.max_header_bytes):
            # A pipelined request waits in h11's buffer, and uvicorn paused reading for it:
            # read on (up to one header block's worth) so the client's FIN is still seen.
            self.flow.resume_reading()

    def _partial_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])

    def request_unread(self) -> bool:
        # ERROR: h11 refused what the client sent (a header block over the limit: 431), which
        # may still be arriving.
        return self.conn.their_state in (h11.SEND_BODY, h11.ERROR) or self._partial_headers()

    def send_400_response(self, msg: str) -> None:
        # h11 refuses a block over its max_incomplete_event_size (set to max_header_bytes by
        # server/__main__.py) as a protocol error: that one is a 431.
        if len(self.conn.trailing_data[0]) > self.limits.max_header_bytes:
            self._header_bytes = 0
            self._count_header_bytes(len(self.conn.trailing_data[0]))
            return
        super().send_400_response(msg)


PROTOCOLS: dict[str, type[asyncio.Protocol]] = {"httptools": LimitedHttpTools, "h11": LimitedH11}


def protocol_class(name: HttpImpl, limits: HttpLimits | None = None,
                   lane: Any = None) -> type[asyncio.Protocol]:
    """uvicorn's protocol `name` with these limits (uvicorn instantiates it per connection), and
    the completion lane that serves the chat route below the framework (httptools only)."""
    base = PROTOCOLS[name]
    attributes: dict[str, Any] = {}
    if limits is not None:
        attributes["limits"] = limits
    if lane is not None and base is LimitedHttpTools:
        attributes["lane"] = lane
    return type(base.__name__, (base,), attributes) if attributes else base
