"""HTTP/1.1 on a raw loopback socket, for what a client library will not send: a chunked body
of the test's own pieces, a trickled body, two requests in one write, a departure at a chosen
moment. Responses are parsed by the standard library's `http.client`, several from one socket."""
from __future__ import annotations

import contextlib
import http.client
import json
import socket
from typing import Any, BinaryIO, Iterator


def request_head(method: str, path: str, headers: dict[str, str], host: str = "127.0.0.1") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}",
             *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def post(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """A POST with its Content-Length, headers and body in one piece."""
    return request_head("POST", path, {"Content-Type": "application/json",
                                       "Content-Length": str(len(body)), **(headers or {})}) + body


def chunked(pieces: list[bytes]) -> bytes:
    """The body as `Transfer-Encoding: chunked`, one chunk per piece, then the last chunk."""
    return b"".join(b"%x\r\n%b\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


class _Shared:
    """One reader for every response of a connection (http.client closes its file after each)."""

    def __init__(self, reader: BinaryIO) -> None:
        self.reader = reader

    def makefile(self, mode: str) -> Any:
        return self

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)


class Connection:
    def __init__(self, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self._shared = _Shared(self.sock.makefile("rb"))

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, method: str = "POST") -> http.client.HTTPResponse:
        """The next response's status and headers (its body: `.read()`, or line by line)."""
        reply = http.client.HTTPResponse(self._shared, method=method)  # type: ignore[arg-type]
        reply.begin()
        return reply

    def interim(self) -> int:
        """The status of an interim (1xx) response, which `response()` would skip over."""
        status = int(self._shared.reader.readline().split()[1])
        while self._shared.reader.readline() not in (b"\r\n", b"\n", b""):
            pass
        return status

    def rest(self) -> bytes:
        """All the server sends until its FIN (b"" if it sends nothing more); a reset raises."""
        return self._shared.reader.read()

    def kept(self) -> bool:
        """Whether the server still serves this connection: a GET /healthz gets its 200."""
        try:
            self.send(request_head("GET", "/healthz", {}))
            reply = self.response("GET")
            reply.read()
            return reply.status == 200
        except (OSError, http.client.HTTPException):
            return False

    def close(self) -> None:
        """The client's departure: the socket's file descriptor closes only once its reader is
        closed too (the reader holds a reference to it)."""
        with contextlib.suppress(OSError):
            self._shared.reader.close()
            self.sock.close()


@contextlib.contextmanager
def connection(port: int, timeout_s: float) -> Iterator[Connection]:
    opened = Connection(port, timeout_s)
    try:
        yield opened
    finally:
        opened.close()


def events(body: bytes) -> list[Any]:
    """An SSE body as its data objects (their per-request `id` and `created` left out) and the
    other lines, in order."""
    seen: list[Any] = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            frame = json.loads(line[6:])
            for varying in ("id", "created"):
                frame.pop(varying, None)
            seen.append(frame)
        elif line:
            seen.append(line)
    return seen
