"""uvicorn's HTTP protocols, counting the TCP connections they accept.

The upstream-keepalive lab needs to know how many connections a proxy opened to the server;
uvicorn creates one protocol instance per accepted connection, so counting there is exact
(an ASGI middleware only sees requests, not connections).
"""
from __future__ import annotations

import asyncio
from typing import Literal

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from server.metrics import HTTP_CONNECTIONS

HttpImpl = Literal["httptools", "h11"]


class CountingHttpTools(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        HTTP_CONNECTIONS.inc()
        super().connection_made(transport)


class CountingH11(H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        HTTP_CONNECTIONS.inc()
        super().connection_made(transport)


PROTOCOLS: dict[str, type[asyncio.Protocol]] = {"httptools": CountingHttpTools, "h11": CountingH11}


def protocol_class(name: HttpImpl) -> type[asyncio.Protocol]:
    return PROTOCOLS[name]
