"""nginx's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import (BODY, CERTIFICATE, COMPRESSIBLE, HEADERS, IDLE, MAX_BODY, PRIVATE_KEY,
                                    SESSION_CACHE, SILENCE)
from proxies.nginx.settings import NginxSettings


# Requests in flight per client address: nginx cannot bound a whole upload (only a pause in it),
# so a client trickling many is bounded by this. Above the 1,000 streams one address (a gateway,
# the load lab) runs through this config; a quarter of what 2 workers hold (2 x 4096 / 2 streams).
PER_CLIENT = 1024


def nginx() -> NginxSettings:
    return NginxSettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        worker_processes="auto", worker_connections=4096, worker_rlimit_nofile=16384,
        listen_backlog=4096,
        proxy_buffering=False, proxy_http_version="1.1", proxy_connection_header="",
        upstream_keepalive=64, upstream_keepalive_timeout="4s",
        proxy_connect_timeout="5s", proxy_read_timeout=SILENCE, proxy_send_timeout="60s",
        proxy_ignore_client_abort=False, client_max_body_size=f"{MAX_BODY // 1024 // 1024}m",
        client_header_timeout=HEADERS, client_body_timeout=BODY, keepalive_timeout=IDLE,
        limit_conn_per_client=PER_CLIENT,
        server_tokens=False, json_errors=True, modsecurity_note=True,
        gzip=True, gzip_types=COMPRESSIBLE)


def nginx_tls() -> NginxSettings:
    return nginx().with_(
        tls_http2=True, ssl_certificate=CERTIFICATE, ssl_certificate_key=PRIVATE_KEY,
        ssl_protocols=("TLSv1.2", "TLSv1.3"), ssl_session_cache=SESSION_CACHE)
