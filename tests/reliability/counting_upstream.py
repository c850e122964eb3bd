"""An upstream with NO body limit of its own, which counts the body bytes it receives: behind a
proxy it shows what the proxy, not the server, lets through (a whole too-large prompt, a slow
upload forwarded while it trickles).

It reads each request's headers, then its body (by Content-Length or chunked), and answers
200 with a small JSON body once the body is complete; `bodies` holds the bytes each request
delivered (complete or cut short), `open_connections` the connections open now.
"""
from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field
from typing import Iterator

from server.processes import free_port

ANSWER = b'{"ok": true}'


@dataclass
class CountingUpstream:
    port: int
    bodies: list[int] = field(default_factory=list)  # body bytes each finished request delivered
    complete: list[bool] = field(default_factory=list)  # whether each one arrived whole
    open_connections: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def largest_body(self) -> int:
        with self._lock:
            return max(self.bodies, default=0)


def _read_until(conn: socket.socket, buffer: bytearray, marker: bytes) -> bool:
    while marker not in buffer:
        data = conn.recv(65536)
        if not data:
            return False
        buffer += data
    return True


def _body(conn: socket.socket, buffer: bytearray, headers: dict[str, str]) -> tuple[int, bool]:
    """Read one body; returns (bytes of body received, whether it was complete)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        received = 0
        while True:
            if not _read_until(conn, buffer, b"\r\n"):
                return received, False
            line, _, rest = bytes(buffer).partition(b"\r\n")
            size = int(line.split(b";")[0] or b"0", 16)
            del buffer[:len(line) + 2]
            while len(buffer) < size + 2:
                data = conn.recv(65536)
                if not data:
                    return received + min(len(buffer), size), False
                buffer += data
            received += size
            del buffer[:size + 2]
            if size == 0:
                return received, True
    length = int(headers.get("content-length", "0"))
    while len(buffer) < length:
        data = conn.recv(65536)
        if not data:
            return len(buffer), False
        buffer += data
    del buffer[:length]
    return length, True


def _serve(upstream: CountingUpstream, conn: socket.socket) -> None:
    with upstream._lock:
        upstream.open_connections += 1
    buffer = bytearray()
    try:
        while _read_until(conn, buffer, b"\r\n\r\n"):
            head, _, _ = bytes(buffer).partition(b"\r\n\r\n")
            del buffer[:len(head) + 4]
            lines = head.decode("latin-1").split("\r\n")
            headers = {name.strip().lower(): value.strip() for name, _, value in
                       (line.partition(":") for line in lines[1:])}
            received, whole = 0, True
            try:
                received, whole = _body(conn, buffer, headers)
            finally:
                with upstream._lock:
                    upstream.bodies.append(received)
                    upstream.complete.append(whole)
            if not whole:
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
    except OSError:
        return
    finally:
        conn.close()
        with upstream._lock:
            upstream.open_connections -= 1


@contextlib.contextmanager
def counting_upstream() -> Iterator[CountingUpstream]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = free_port()
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    upstream = CountingUpstream(port)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_serve, args=(upstream, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield upstream
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
