"""The production settings behind `proxies/fixed/`: what streams well, with headroom.

Every choice here is explained in the exported files' comments; the numbers:
- Silences: the server sends a `: ping` heartbeat after 10 s of silence, so a 300 s read/idle
  timeout leaves a wide margin for prefill and queueing, and no timeout bounds a whole stream.
- Concurrency: at least 1,000 streams, each holding a client and an upstream connection.
- Upstream keepalive: idle upstream connections are dropped after 4 s, before uvicorn's own 5 s
  keep-alive timeout, so a proxy never reuses a connection the server is closing.
- Hostile or unlucky clients (they bound the wait for a CLIENT, never a stream in flight):
  headers within 10 s (SDKs send them at once; a trickle or a silent connection is closed),
  an idle keep-alive connection closed after 60 s (above SDK pools' 5 s expiry, so a client
  never sends on a connection the proxy is closing), a whole request body within 60 s (Envoy)
  or no pause over 60 s in it (nginx, HAProxy).
- Bodies above the server's own limit (8 MiB, `--max-body-bytes`) get 413 at the proxy.
- The proxies' own errors are OpenAI-shaped JSON (proxies/errors.py); nginx hides its version;
  Envoy's admin serves only read-only paths (a web page can POST to loopback).
- TLS with HTTP/2 (`nginx-tls.conf`, `envoy-tls.yaml`): the same settings on a TLS listener that
  offers h2 by ALPN, naming the user's certificate and key where Debian keeps them (the lab
  swaps in a self-signed pair made at run time); TLS 1.2 and 1.3 only, sessions resumable.
"""
from __future__ import annotations

from proxies.apache.settings import ApacheSettings
from proxies.caddy.settings import CaddySettings
from proxies.envoy.settings import EnvoySettings
from proxies.haproxy.settings import HaproxySettings
from proxies.nginx.settings import NginxSettings
from proxies.varnish.settings import VarnishSettings

SILENCE = 300  # seconds: the longest silence a stream may keep, heartbeats aside
COMPRESSIBLE = ("application/json", "text/plain")  # never text/event-stream
HEADERS = 10  # seconds to receive a request's headers
IDLE = 60  # seconds an idle client connection (no request in flight) stays open
BODY = 60  # seconds: the longest pause in a request body (nginx, HAProxy), the whole body (Envoy)
MAX_BODY = 8 * 1024 * 1024  # bytes: the server's own --max-body-bytes default
# Varnish's send_timeout bounds a WHOLE response (600 s by default): above any answer's length.
LONGEST_ANSWER = 3600  # seconds
# Envoy's admin paths the lab and operators read; nothing that changes or stops Envoy.
ADMIN_READ_ONLY = ("/ready", "/stats", "/stats/prometheus", "/server_info")
# Where the TLS exports look for the user's certificate (PEM, chain after it) and its key.
CERTIFICATE = "/etc/ssl/certs/proxy.pem"
PRIVATE_KEY = "/etc/ssl/private/proxy.key"
# About 40,000 TLS sessions, shared by nginx's workers: a reconnecting client skips the handshake.
SESSION_CACHE = "shared:SSL:10m"


def nginx() -> NginxSettings:
    return NginxSettings(
        worker_processes="auto", worker_connections=4096, worker_rlimit_nofile=16384,
        listen_backlog=4096,
        proxy_buffering=False, proxy_http_version="1.1", proxy_connection_header="",
        upstream_keepalive=64, upstream_keepalive_timeout="4s",
        proxy_connect_timeout="5s", proxy_read_timeout=SILENCE, proxy_send_timeout="60s",
        proxy_ignore_client_abort=False, client_max_body_size=f"{MAX_BODY // 1024 // 1024}m",
        client_header_timeout=HEADERS, client_body_timeout=BODY, keepalive_timeout=IDLE,
        server_tokens=False, json_errors=True,
        gzip=True, gzip_types=COMPRESSIBLE)


def nginx_tls() -> NginxSettings:
    return nginx().with_(
        tls_http2=True, ssl_certificate=CERTIFICATE, ssl_certificate_key=PRIVATE_KEY,
        ssl_protocols=("TLSv1.2", "TLSv1.3"), ssl_session_cache=SESSION_CACHE)


def haproxy() -> HaproxySettings:
    return HaproxySettings(
        maxconn_global=8192, maxconn_frontend=4096,
        http_no_delay=True, abortonclose=True,
        compression_algo="gzip", compression_types=COMPRESSIBLE,
        # timeout client bounds a client that pauses its upload or stops reading, never a silence
        # of the server's (measured: a 1 s timeout client did not cut a stream silent for 3 s).
        timeout_connect="5s", timeout_client=BODY, timeout_server=SILENCE, timeout_tunnel="1h",
        timeout_http_request=HEADERS, timeout_http_keep_alive=IDLE,
        max_body_bytes=MAX_BODY, json_errors=True,
        http_reuse="safe")


def envoy() -> EnvoySettings:
    return EnvoySettings(
        route_timeout=0, route_idle_timeout=SILENCE, stream_idle_timeout=SILENCE,
        connect_timeout="5s", upstream_idle_timeout="4s",
        compressor=True, compressor_content_types=COMPRESSIBLE,
        max_connections=4096, max_pending_requests=4096, max_requests=4096,
        max_downstream_connections=8192,
        request_headers_timeout=HEADERS, request_timeout=BODY, downstream_idle_timeout=IDLE,
        max_request_bytes=MAX_BODY, json_errors=True, admin_allow_paths=ADMIN_READ_ONLY)


def envoy_tls() -> EnvoySettings:
    # Envoy's own TLS defaults already offer TLS 1.2 and 1.3 only, and resume sessions by ticket.
    return envoy().with_(tls_http2=True, certificate_chain=CERTIFICATE, private_key=PRIVATE_KEY)


def varnish() -> VarnishSettings:
    # A CDN in front of a model: event streams are never cached nor coalesced; the backend's
    # silences are bounded as elsewhere. Varnish's header timeout is its runtime parameter
    # timeout_idle (5 s), already under HEADERS; the VCL can set only the idle wait after a request.
    return VarnishSettings(
        pass_event_streams=True, do_stream=True,
        connect_timeout="5s", first_byte_timeout=SILENCE, between_bytes_timeout=SILENCE,
        timeout_idle=IDLE, send_timeout=LONGEST_ANSWER, idle_send_timeout=BODY,
        max_body_bytes=MAX_BODY, json_errors=True)


def apache() -> ApacheSettings:
    # Timeout also bounds a pause in the client's upload (BODY); ProxyTimeout the server's silences.
    return ApacheSettings(
        timeout=BODY, proxy_timeout=SILENCE, flushpackets="on", deflate_types=COMPRESSIBLE,
        request_header_timeout=HEADERS, request_body_timeout=BODY, keepalive_timeout=IDLE,
        limit_request_body=MAX_BODY, json_errors=True, max_request_workers=1000)


def caddy() -> CaddySettings:
    return CaddySettings(
        encode=("gzip",), encode_skip_event_streams=True, flush_interval="-1",
        dial_timeout="5s", read_timeout=SILENCE,
        read_header_timeout=HEADERS, idle_timeout=IDLE,
        max_body_bytes=MAX_BODY, json_errors=True)
