"""The readiness checks a proxy kind's `ready` is made of: polled on a started proxy (a host
process, a container, a user's config under `labs verify`) until every one passes."""
from __future__ import annotations

import socket

from proxies.admin import admin_ok
from proxies.kind import Endpoint, Probe
from proxies.logs import READY_PATH
from server.processes import port_accepts


def port_open(endpoint: Endpoint) -> bool:
    return port_accepts(endpoint.port, endpoint.host)


def answers(endpoint: Endpoint) -> bool:
    """Whether the proxy answers HTTP (for one that opens its port before it can serve). The probe
    is an HTTP/1.1 request without a Host header, which every proxy refuses with a 400 of its
    own: it never reaches the upstream (a request counted there, or cached by Varnish, would
    skew what a test measures)."""
    return status_line(endpoint, f"GET {READY_PATH} HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.")


def status_line(endpoint: Endpoint, request: str) -> bytes:
    """The first bytes the proxy answers `request` with (empty when it cannot be asked)."""
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=2) as sock:
            sock.sendall(request.encode())
            return sock.recv(16)
    except OSError:
        return b""


def admin_answers(path: str) -> Probe:
    """The admin endpoint (its port or its socket) answers `path` with 200. A config run without
    an admin (a user's, under `labs verify`) has nothing to ask: the other checks decide."""
    def probe(endpoint: Endpoint) -> bool:
        if endpoint.admin_port is None and endpoint.admin_socket is None:
            return True
        return admin_ok(endpoint, path)
    return probe


def ready(probes: tuple[Probe, ...], endpoint: Endpoint) -> bool:
    return all(probe(endpoint) for probe in probes)
