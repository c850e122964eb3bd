"""What the proxy reliability tests share: each fixed proxy with its client timeouts scaled down,
raw-socket clients that trickle or stay silent, and the server's gauges.

The fixed configs wait 10 s for headers and 60 s on idle connections; the tests scale those to
1 s and 3 s (the rest of proxies/fixed stays as exported), so a closed connection is seen within
seconds, and the two bounds are far enough apart to tell which one closed it.
"""
from __future__ import annotations

import contextlib
import http.client
import os
import select
import socket
import time
from typing import Any, Iterator

import pytest

from proxies import ProxySettings, variant
from proxies.base import ProxyName
from proxies.export import export_for
from proxies.kinds import KINDS, choose_releases
from proxies.releases import CHOICE_VARIABLE
from proxies.runtime.local import LocalProxy, LocalRuntime, run_proxy
from server.processes import wait_until
from tests.runtimes import on_free_ports

PROXIES: tuple[ProxyName, ...] = ("nginx", "haproxy", "envoy")
HEADER_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 3.0
# How late a proxy may act on a timer on a shared, noisy 2-core machine; the bounds it separates
# are IDLE_TIMEOUT_S - HEADER_TIMEOUT_S = 2 s apart, and the trickles last 20 s.
LATE_S = 1.5
# The whole-body deadline (HAProxy's wait-for-body, Apache's RequestReadTimeout body=, Envoy's
# request_timeout, Caddy's read_body), 60 s in the fixed configs, between the two bounds above so
# each is told apart; Traefik's readTimeout is scaled to HEADER_TIMEOUT_S: it is its header
# timeout too. A slow upload is closed at it (tests/reliability/test_hostile_bodies.py).
BODY_TIMEOUT_S = 2.0

SCALED: dict[ProxyName, dict[str, Any]] = {
    "nginx": {"client_header_timeout": HEADER_TIMEOUT_S, "keepalive_timeout": IDLE_TIMEOUT_S},
    "haproxy": {"timeout_http_request": HEADER_TIMEOUT_S, "timeout_http_keep_alive": IDLE_TIMEOUT_S,
                "timeout_body": BODY_TIMEOUT_S},
    "envoy": {"request_headers_timeout": HEADER_TIMEOUT_S, "downstream_idle_timeout": IDLE_TIMEOUT_S,
              "request_timeout": BODY_TIMEOUT_S},
    # Varnish's header wait is its runtime parameter timeout_idle (5 s), which a VCL cannot set.
    "varnish": {"timeout_idle": IDLE_TIMEOUT_S},
    "apache": {"request_header_timeout": int(HEADER_TIMEOUT_S), "keepalive_timeout": int(IDLE_TIMEOUT_S),
               "request_body_timeout": int(BODY_TIMEOUT_S)},
    "caddy": {"read_header_timeout": HEADER_TIMEOUT_S, "read_body_timeout": BODY_TIMEOUT_S,
              "idle_timeout": IDLE_TIMEOUT_S},
    # Traefik's readTimeout bounds the whole request, headers and body (tests/reliability/test_traefik_hostile.py).
    "traefik": {"read_timeout": HEADER_TIMEOUT_S, "idle_timeout": IDLE_TIMEOUT_S},
}
# Varnish, Apache and Caddy: what each program allows is checked in test_more_proxies_hostile.py.
MORE_PROXIES: tuple[ProxyName, ...] = ("varnish", "apache", "caddy")
# Which bound closes a connection that never sends a byte: nginx and HAProxy time the first
# request's headers from the accept; Envoy's header timer starts at the first byte, so its idle
# timeout (no request in flight) is what closes a silent connection.
SILENT_BOUND_S: dict[ProxyName, float] = {
    "nginx": HEADER_TIMEOUT_S, "haproxy": HEADER_TIMEOUT_S, "envoy": IDLE_TIMEOUT_S}
# When an idle keep-alive connection is closed: Envoy first drains a connection that has served a
# request, for its drain_timeout (5 s) and delayed_close_timeout (1 s), both Envoy's defaults.
IDLE_CLOSE_S: dict[ProxyName, float] = {
    "nginx": IDLE_TIMEOUT_S, "haproxy": IDLE_TIMEOUT_S, "envoy": IDLE_TIMEOUT_S + 5 + 1}

SERVER_ARGS = ["--engine", "synthetic", "--slots", "32", "--max-queue", "256"]
ERROR_KEYS = {"message", "type", "param", "code"}


class OnRelease(str):
    """A proxy's name that also names one of its releases (None: the run's choice, below). It is
    equal to the name, so every table keyed by proxy finds it; fixed() runs that release."""

    series: str | None

    def __new__(cls, proxy: str, series: str | None = None) -> "OnRelease":
        named = super().__new__(cls, proxy)
        named.series = series
        return named


def release_to_run(proxy: ProxyName) -> str:
    """The release a fixed config's test runs: the one `proxy` names (OnRelease), else the run's
    choice (LAB_PROXY_VERSION: `oldest` runs the whole table on Debian 12's binaries), else the
    current one."""
    return getattr(proxy, "series", None) or choose_releases(os.environ.get(CHOICE_VARIABLE), [proxy],
                                                             strict=False)[proxy]


def older_with_another_file(proxy: ProxyName) -> tuple[str, ...]:
    """The older releases whose fixed config is another file (proxies.export: Caddy 2.6's
    `Caddyfile-2.6`, where 2.7 renamed buffer_requests): what that file does is measured too."""
    current = export_for(proxy).file
    return tuple(release.series for release in KINDS[proxy].releases[:-1]
                 if export_for(proxy, "fixed", release.series).file != current)


def on_releases(proxies: tuple[ProxyName, ...] | list[ProxyName]) -> list[Any]:
    """Test parameters: each proxy on the run's release, and again on each older release whose
    fixed file differs (id `caddy-2.6`: 11 s more at -n 2). Where the file is the same (nginx,
    HAProxy, Varnish) the older binary runs the tables with LAB_PROXY_VERSION=oldest, not in
    every `make test`: measured 2026-12-06, the 87 fixed-proxy tests of test_hostile_bodies,
    test_more_proxies_hostile, test_proxies_hostile and test_proxies_faults passed on Debian 12's
    binaries and on the current releases alike (94.7 s and 98.8 s at -n 2), so a second pass
    would double them to prove nothing the first does not."""
    return [*(pytest.param(OnRelease(proxy), id=proxy) for proxy in proxies),
            *(pytest.param(OnRelease(proxy, series), id=f"{proxy}-{series}")
              for proxy in proxies for series in older_with_another_file(proxy))]


def fixed(proxy: ProxyName, upstream_port: int, **changes: Any) -> ProxySettings:
    """The exported fixed variant on free ports, its client timeouts scaled, plus `changes`, for
    the release to run (release_to_run)."""
    settings = variant(proxy, "fixed").with_(version=release_to_run(proxy))
    return on_free_ports(settings, upstream_port).with_(**{**SCALED[proxy], **changes})


def running_server(args: list[str] | None = None) -> contextlib.AbstractContextManager[Any]:
    return LocalRuntime().run_server(SERVER_ARGS if args is None else args)


@contextlib.contextmanager
def fixed_proxy(proxy: ProxyName, upstream_port: int, **changes: Any) -> Iterator[LocalProxy]:
    with run_proxy(fixed(proxy, upstream_port, **changes)) as running:
        yield running


def connect(proxy: LocalProxy) -> socket.socket:
    return socket.create_connection((proxy.settings.listen_host, proxy.settings.listen_port), timeout=5)


def _closed(sock: socket.socket) -> bool:
    """True once the peer has closed (EOF or reset); data it sends first (an error page) is read."""
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def seconds_until_closed(sock: socket.socket, limit_s: float, trickle: bytes = b"",
                         every_s: float = 0.1) -> float | None:
    """Send `trickle` one byte per `every_s` (or nothing), and return how long the proxy kept
    the connection open from now; None if it was still open after `limit_s`."""
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < limit_s:
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable and _closed(sock):
            return elapsed
        if sent < len(trickle):
            try:
                sock.sendall(trickle[sent:sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - started
            sent += 1
    return None


def connections_to(port: int) -> int:
    """Established IPv4 connections to 127.0.0.1:`port` on this host (an upstream's clients)."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as table:
        next(table, None)  # header
        return sum(1 for line in table if (cols := line.split())[2:4] == [wanted, "01"])


def exchange(sock: socket.socket, request: bytes) -> tuple[http.client.HTTPResponse, bytes]:
    """Send one raw request on `sock`, read its whole response (the connection stays open)."""
    sock.sendall(request)
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response, response.read()


def assert_openai_error(response: Any, status: int | tuple[int, ...], code: str | None = None) -> dict:
    """The response is the proxy's own error in the OpenAI shape; returns its `error` object."""
    statuses = (status,) if isinstance(status, int) else status
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    error = response.json()["error"]
    assert set(error) == ERROR_KEYS and error["param"] is None, error
    assert error["message"] and error["type"] in ("invalid_request_error", "server_error", "timeout")
    if code is not None:
        assert error["code"] == code, error
    return error


def gauges(server: Any) -> dict[str, float]:
    metrics = server.metrics()
    return {name: metrics.get(name, -1.0) for name in
            ("streamlab_slots_in_use", "streamlab_active_streams", "streamlab_queued_requests")}


def wait_all_freed(server: Any, timeout_s: float) -> None:
    """Poll until no slot, no stream and no queued request is held (every gauge back to 0)."""
    wait_until(lambda: all(value == 0 for value in gauges(server).values()), timeout_s,
               interval_s=0.05, describe=f"every slot freed (last: {gauges(server)})")


def chat(max_tokens: int = 20, **lab: Any) -> dict[str, Any]:
    return {"model": "tiny", "stream": True, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Tell me a story."}], "lab": lab}


def content_event(line: str) -> bool:
    return line.startswith("data: ") and '"content":' in line and '"role"' not in line
