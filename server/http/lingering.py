"""A lingering close: an answer sent while the client is still sending its request reaches it.

Closing a socket with unread bytes in its receive buffer makes the kernel send RST, and a peer
that gets the RST before it has read the answer loses the answer: behind Caddy 2.6.2, with the
server's body limit below Caddy's, an upload got Caddy's 502 instead of the server's 413 in 3 of
12 runs (docs/proxies.md). RFC 9112 §9.6 ("Tear-down"): a server that closes while the client
may still be sending half-closes, then reads on for a while before it closes. This is that,
for every close uvicorn or the server makes while a request is still arriving (a refused body,
a 408 or 431 mid-headers): the answer goes out, then a FIN, then what the client still sends
is read and dropped until it closes its side, LINGER_S have passed or LINGER_BYTES were read.

One home for both ways: the protocols of server/http/connections.py hand uvicorn this transport, so
the completion lane's close and the ASGI route's (uvicorn's `RequestResponseCycle.send` closes
`cycle.transport` after a `Connection: close` answer) are the same call.
"""
from __future__ import annotations

import asyncio
import weakref
from typing import Any, Protocol

# nginx lingers up to lingering_time 30 s, each read within lingering_timeout 5 s
# (https://nginx.org/en/docs/http/ngx_http_core_module.html#lingering_time), with no byte bound.
# Here a refused client may hold a connection 2 s at most: on loopback a proxy forwards a whole
# 8 MiB body (the fixed configs' limit) in well under that, and a client told "no" gets no more.
LINGER_S = 2.0
# The discarding ends sooner past this much: the fixed proxies' body limit, so a proxy still
# forwarding up to its own limit is read to its end, and a fast sender costs bounded work.
LINGER_BYTES = 8 * 1024 * 1024


class Lingerer(Protocol):
    def request_unread(self) -> bool: ...


def _closing() -> bool:
    return True


class LingeringTransport:
    """uvicorn's transport for one connection, whose `close()` lingers while `protocol` says a
    request is still arriving. Every other call is the real transport's own bound method (no
    extra frame on a stream's writes)."""

    def __init__(self, real: asyncio.Transport, protocol: Lingerer,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.real = real
        # Weak: the protocol holds this transport, and a reference cycle would leave every
        # connection to the cyclic collector (tests/server/test_no_cycles.py).
        self.protocol = weakref.ref(protocol)
        self.loop = loop
        self.lingering = False
        self.discarded = 0
        self.write = real.write
        self.is_closing = real.is_closing
        self.pause_reading = real.pause_reading
        self.resume_reading = real.resume_reading
        self.get_extra_info = real.get_extra_info

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def close(self) -> None:
        protocol = self.protocol()
        if (self.lingering or self.real.is_closing() or not self.real.can_write_eof()
                or protocol is None or not protocol.request_unread()):
            self.real.close()
            return
        self.lingering = True
        # uvicorn reads is_closing() as "this connection is done": no keep-alive timer, no
        # pipelined request started, nothing more written.
        self.is_closing = _closing
        self.real.write_eof()  # the FIN after what is buffered: the answer is whole
        self.real.resume_reading()  # flow control may have paused reading at 64 KiB
        self.loop.call_later(LINGER_S, self.real.close)

    def discard(self, data: bytes) -> None:
        """Bytes that arrived while lingering: dropped, the connection closed past LINGER_BYTES."""
        self.discarded += len(data)
        if self.discarded > LINGER_BYTES:
            self.real.close()
