"""What the server offers a request in its ASGI scope's `extensions`, beyond the ASGI spec, and
what implements it on uvicorn's request cycle (server/connections.py sets them per request).

The stream (server/streaming.py, server/sse_writer.py) uses each one when it is there and falls
back to plain ASGI when it is not (another server, a test, a layer that sees every message):

* `streamlab.abort`: cut the connection now, unflushed;
* `streamlab.body_send`: uvicorn's own `send`, past the layers that only watch the start;
* `streamlab.on_departure`: be called when the client's connection is lost;
* `streamlab.gather`: writes made in one instant leave in one socket write;
* `streamlab.write_now`: a body write without a coroutine, for tokens written from the engine's
  hand-over.
"""
from __future__ import annotations

import asyncio
from typing import Any

# Set in every request's ASGI scope: abort the connection at once, unflushed. A stream blocked on
# a client that does not read ends this way (a close would wait for the buffer to drain).
ABORT_EXTENSION = "streamlab.abort"
# Also set: uvicorn's own `send` of the request, for a stream's body writes (server/sse_writer.py).
# Between it and the app sit only layers that watch the response start (the error middlewares,
# the body limit, CORS); each wrapped every body write in a coroutine of its own, a few per
# token. A layer that does look at body messages removes it from the scope
# (`without_body_send`: the records, the gzip failure mode), and the writes go through it.
BODY_SEND_EXTENSION = "streamlab.body_send"
# Also set (httptools): `on_departure(callback)`, the callback called when the client's connection
# is lost before the response is complete (at once if it already is). A stream hears its
# client leave from the connection itself, instead of from a task waiting on `receive()`.
# Removed with the body send by a layer that sees every message (it may watch `receive()`).
DEPARTURE_EXTENSION = "streamlab.on_departure"


def offer_abort(scope: Any, transport: asyncio.Transport, body_send: Any = None) -> None:
    extensions = scope.setdefault("extensions", {})
    extensions.setdefault(ABORT_EXTENSION, transport.abort)
    if body_send is not None:
        extensions.setdefault(BODY_SEND_EXTENSION, body_send)


# Also set (httptools): `gather()`, a context in which the response's writes are kept and leave
# in one socket write when it ends: the headers with the role frame, the finish frame with
# `[DONE]` and the body's end. Each write on loopback is a send() and the receiver's wake-up.
GATHER_EXTENSION = "streamlab.gather"

# Also set (httptools): `write_now`, a stream's body writes without a coroutine, for the tokens
# the engine hands over while the stream waits for them (server/streaming.py `_take`): no task
# wake-up per token. `ready()` says whether a write may go now (headers sent, chunked, the
# client connected and reading); otherwise the token goes the awaited way.
WRITE_NOW_EXTENSION = "streamlab.write_now"

_SEEN_BY_LAYERS = (BODY_SEND_EXTENSION, DEPARTURE_EXTENSION, WRITE_NOW_EXTENSION)


class WriteNow:
    __slots__ = ("cycle",)

    def __init__(self, cycle: Any) -> None:
        self.cycle = cycle

    def ready(self) -> bool:
        cycle = self.cycle
        return (cycle.response_started and cycle.chunked_encoding and not cycle.response_complete
                and not cycle.disconnected and not cycle.flow.write_paused
                and type(cycle.transport) is not Gathering)

    def write(self, body: bytes) -> None:
        """One chunk, as uvicorn's send() frames it (after `ready()`)."""
        self.cycle.transport.write(b"%x\r\n%b\r\n" % (len(body), body))


class Gathering:
    """Stands in for a cycle's transport while `gather()` lasts: keeps its writes (and a close)."""

    def __init__(self, real: asyncio.Transport) -> None:
        self.real = real
        self.pieces: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.pieces.append(data)

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing or self.real.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class Gather:
    """`with gather():` on one request cycle (uvicorn's cycle writes through `cycle.transport`).
    Blocks nest: the outermost one writes."""

    __slots__ = ("cycle", "depth")

    def __init__(self, cycle: Any) -> None:
        self.cycle = cycle
        self.depth = 0

    def __call__(self) -> "Gather":
        return self

    def __enter__(self) -> None:
        if self.depth == 0:
            self.cycle.transport = Gathering(self.cycle.transport)
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth:
            return
        gathering = self.cycle.transport
        real = self.cycle.transport = gathering.real
        if gathering.pieces and not real.is_closing():
            real.write(b"".join(gathering.pieces))
        if gathering.closing:
            real.close()


# Those that refer back to the request's cycle (its bound `send`, the objects holding it): a
# reference cycle through the scope, which `release` breaks when the request ends.
_ON_CYCLE = (BODY_SEND_EXTENSION, DEPARTURE_EXTENSION, GATHER_EXTENSION, WRITE_NOW_EXTENSION)


def release(cycle: Any) -> None:
    """The request has ended: drop what the server hung on its cycle and scope. Each piece
    refers back to the cycle, so without this everything the request made (its stream, job,
    generation, ~50 objects) stayed until the cyclic collector's passes found it, and those
    passes, over the live objects of 1,000 streams, cost a burst 94 us of CPU per request
    (docs/performance.md; tests/server/test_no_cycles.py)."""
    extensions = cycle.scope.get("extensions")
    if extensions:
        for name in _ON_CYCLE:
            extensions.pop(name, None)
    cycle.streamlab_departure = None


def without_body_send(scope: Any) -> Any:
    """`scope` for a layer that sees every message: body writes must pass through it, and the
    departure must reach the app through its `receive()`."""
    extensions = scope.get("extensions")
    if not extensions or not any(name in extensions for name in _SEEN_BY_LAYERS):
        return scope
    return {**scope, "extensions": {k: v for k, v in extensions.items() if k not in _SEEN_BY_LAYERS}}


def departure_of(cycle: Any) -> Any:
    """`on_departure` for one request cycle of LimitedHttpTools (its connection_lost calls it)."""
    def on_departure(callback: Any) -> None:
        if cycle.disconnected:
            callback()
        else:
            cycle.streamlab_departure = callback
    return on_departure
