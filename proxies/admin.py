"""Talking to a proxy's admin endpoint, on 127.0.0.1:PORT or on a Unix socket (Envoy's fixed
config keeps its admin off TCP entirely): one client for readiness, stats and the tests."""
from __future__ import annotations

from pathlib import Path

import httpx

from proxies.kind import Endpoint


def admin_client(endpoint: Endpoint, timeout_s: float = 5.0) -> httpx.Client:
    """An httpx client whose relative URLs ("/stats") reach the admin; the caller closes it.
    Raises ValueError when the endpoint has no admin (neither a port nor a socket)."""
    if endpoint.admin_socket is not None:
        # The host part is never resolved: every request goes through the socket.
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(endpoint.admin_socket)),
                            base_url="http://admin.localhost", timeout=timeout_s, trust_env=False)
    if endpoint.admin_port is None:
        raise ValueError("this proxy runs with no admin endpoint")
    return httpx.Client(base_url=f"http://127.0.0.1:{endpoint.admin_port}", timeout=timeout_s,
                        trust_env=False)


def admin_ok(endpoint: Endpoint, path: str) -> bool:
    """Whether the admin answers GET `path` with 200 (False while it is not up yet)."""
    try:
        with admin_client(endpoint, timeout_s=1.0) as client:
            return client.get(path).status_code == 200
    except (httpx.HTTPError, OSError):
        return False


def socket_in(workdir: Path, path: str | None) -> Path | None:
    """Where a socket named relative to the proxy's working folder lies on this host."""
    if path is None:
        return None
    return Path(path) if Path(path).is_absolute() else workdir / path
