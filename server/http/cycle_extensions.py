"""The server's extensions to a request's ASGI scope (server/stream/extensions.py names them and
says what each means), implemented on uvicorn's request cycle: server/http/connections.py sets
them per request, the layers that see every message take some away, and `release` drops them
when the request ends."""
from __future__ import annotations

import asyncio
from typing import Any

from server.stream.extensions import (ABORT_EXTENSION, BODY_SEND_EXTENSION, DEPARTURE_EXTENSION,
                                      GATHER_EXTENSION, WRITE_NOW_EXTENSION)


def offer_abort(scope: Any, transport: asyncio.Transport, body_send: Any = None) -> None:
    extensions = scope.setdefault("extensions", {})
    extensions.setdefault(ABORT_EXTENSION, transport.abort)
    if body_send is not None:
        extensions.setdefault(BODY_SEND_EXTENSION, body_send)


# A layer that sees every message (the records, the gzip failure mode) takes these away.
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
