"""The production settings behind `proxies/fixed/`: what streams well, with headroom.

Every choice here is explained in the exported files' comments; the numbers:
- Silences: the server sends a `: ping` heartbeat after 10 s of silence, so a 300 s read/idle
  timeout leaves a wide margin for prefill and queueing, and no timeout bounds a whole stream.
- Concurrency: at least 1,000 streams, each holding a client and an upstream connection.
- Upstream keepalive: idle upstream connections are dropped after 4 s, before uvicorn's own 5 s
  keep-alive timeout, so a proxy never reuses a connection the server is closing.
"""
from __future__ import annotations

from proxies.envoy.settings import EnvoySettings
from proxies.haproxy.settings import HaproxySettings
from proxies.nginx.settings import NginxSettings

SILENCE = 300  # seconds: the longest silence a stream may keep, heartbeats aside
COMPRESSIBLE = ("application/json", "text/plain")  # never text/event-stream


def nginx() -> NginxSettings:
    return NginxSettings(
        worker_processes="auto", worker_connections=4096, worker_rlimit_nofile=16384,
        listen_backlog=4096,
        proxy_buffering=False, proxy_http_version="1.1", proxy_connection_header="",
        upstream_keepalive=64, upstream_keepalive_timeout="4s",
        proxy_connect_timeout="5s", proxy_read_timeout=SILENCE, proxy_send_timeout="60s",
        proxy_ignore_client_abort=False, client_max_body_size="8m",
        gzip=True, gzip_types=COMPRESSIBLE)


def haproxy() -> HaproxySettings:
    return HaproxySettings(
        maxconn_global=8192, maxconn_frontend=4096,
        http_no_delay=True, abortonclose=True,
        compression_algo="gzip", compression_types=COMPRESSIBLE,
        timeout_connect="5s", timeout_client=SILENCE, timeout_server=SILENCE, timeout_tunnel="1h",
        http_reuse="safe")


def envoy() -> EnvoySettings:
    return EnvoySettings(
        route_timeout=0, route_idle_timeout=SILENCE, stream_idle_timeout=SILENCE,
        connect_timeout="5s", upstream_idle_timeout="4s",
        compressor=True, compressor_content_types=COMPRESSIBLE,
        max_connections=4096, max_pending_requests=4096, max_requests=4096,
        max_downstream_connections=8192)
