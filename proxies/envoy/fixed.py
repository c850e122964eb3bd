"""Envoy's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import (ADMIN_READ_ONLY, ADMIN_SOCKET, BODY, CERTIFICATE, COMPRESSIBLE, HEADERS, IDLE, MAX_BODY,
                                    PRIVATE_KEY, SILENCE)
from proxies.envoy.settings import EnvoySettings


def envoy() -> EnvoySettings:
    return EnvoySettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        route_timeout=0, route_idle_timeout=SILENCE, stream_idle_timeout=SILENCE,
        connect_timeout="5s", upstream_idle_timeout="4s",
        compressor=True, compressor_content_types=COMPRESSIBLE,
        max_connections=4096, max_pending_requests=4096, max_requests=4096,
        max_downstream_connections=8192,
        request_headers_timeout=HEADERS, request_timeout=BODY, downstream_idle_timeout=IDLE,
        max_request_bytes=MAX_BODY, json_errors=True,
        admin_socket=ADMIN_SOCKET, admin_allow_paths=ADMIN_READ_ONLY)


def envoy_tls() -> EnvoySettings:
    # Envoy's own TLS defaults already offer TLS 1.2 and 1.3 only, and resume sessions by ticket.
    return envoy().with_(tls_http2=True, certificate_chain=CERTIFICATE, private_key=PRIVATE_KEY)
