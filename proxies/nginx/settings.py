"""nginx settings: every knob the catalogue switches, defaulting to nginx's own defaults. Where a
release changed a default (1.29.7: HTTP/1.1 and a keep-alive pool towards the upstream), the
setting's default is None: the template writes nothing and each release does what it does."""
from __future__ import annotations

from typing import Any, ClassVar, Literal, Union

from pydantic import Field, field_validator, model_validator

from proxies.base import ProxySettings, setting
from proxies.cors import CorsSettings
from proxies.errors import ERRORS, ProxyError, json_errors_setting
from proxies.tls import fill_certificate
from proxies.types import FilePath, HeaderValue, MimeType, NginxDuration, NginxSize, Port, SslSessionCache

CORE = "https://nginx.org/en/docs/ngx_core_module.html"
EVENTS = "https://nginx.org/en/docs/ngx_core_module.html"
PROXY = "https://nginx.org/en/docs/http/ngx_http_proxy_module.html"
UPSTREAM = "https://nginx.org/en/docs/http/ngx_http_upstream_module.html"
GZIP = "https://nginx.org/en/docs/http/ngx_http_gzip_module.html"
HTTP_CORE = "https://nginx.org/en/docs/http/ngx_http_core_module.html"
# Statuses nginx answers on its own in front of one upstream (the upstream's own pass through).
NGINX_OWN_ERRORS = (400, 408, 413, 414, 494, 500, 501, 502, 503, 504)
LIMIT_CONN = "https://nginx.org/en/docs/http/ngx_http_limit_conn_module.html"
SSL = "https://nginx.org/en/docs/http/ngx_http_ssl_module.html"
HTTP2 = "https://nginx.org/en/docs/http/ngx_http_v2_module.html"


# The words proxy_next_upstream takes (nginx 1.22).
NextUpstream = Literal["error", "timeout", "invalid_header", "http_500", "http_502", "http_503",
                       "http_504", "http_403", "http_404", "http_429", "non_idempotent", "off"]


class NginxSettings(ProxySettings, CorsSettings):
    proxy: ClassVar = "nginx"
    template: ClassVar[str] = "nginx/nginx.conf.j2"
    config_name: ClassVar[str] = "nginx.conf"
    tls_fields: ClassVar[tuple[str, ...]] = ("ssl_certificate", "ssl_certificate_key")

    # Processes and connection limits.
    worker_processes: Union[int, Literal["auto"]] = setting(
        1, "worker processes; each holds `worker_connections`", f"{CORE}#worker_processes")
    worker_connections: int = setting(
        512, "connections per worker, client AND upstream sides (a proxied stream costs two)",
        f"{EVENTS}#worker_connections")
    worker_rlimit_nofile: int | None = setting(
        None, "open-file limit for workers (None: inherit the shell's `ulimit -n`)",
        f"{CORE}#worker_rlimit_nofile")

    worker_shutdown_timeout: NginxDuration | None = setting(
        None, "after a reload, how long old workers may keep serving requests in flight (None: "
              "until they finish): a stream still running then is cut", f"{CORE}#worker_shutdown_timeout")

    listen_backlog: int | None = Field(
        None, ge=1, le=65535, description="accept queue of the listening socket (None: nginx's "
        f"511); a burst of new streams beyond it waits for SYN retransmits (1 s, 3 s, 7 s) "
        f"({HTTP_CORE}#listen)")

    # How the response body travels.
    proxy_buffering: bool = setting(
        True, "buffer upstream responses (on: a close-delimited reply, from an HTTP/1.0 upstream, waits "
              "until a buffer fills or the response ends, and over TLS any reply; a chunked one over "
              "plain HTTP is handed on chunk by chunk)",
        f"{PROXY}#proxy_buffering")
    proxy_cache_valid: NginxDuration | None = setting(
        None, "store 200 answers to GET and HEAD for this long and answer again from the store "
              "(`proxy_cache` with a zone inside the prefix; None: no cache, nginx's default). The "
              "upstream's Cache-Control and Expires headers take precedence", f"{PROXY}#proxy_cache")
    pass_accel_buffering: bool = setting(
        False, "pass the upstream's `X-Accel-Buffering` header on to the client (`proxy_pass_header`); "
        "nginx honours it and, by default, removes it, so a proxy in front never sees it",
        f"{PROXY}#proxy_pass_header")
    proxy_request_buffering: bool = setting(
        True, "read the whole request body before forwarding it", f"{PROXY}#proxy_request_buffering")
    proxy_buffer_size: NginxSize = setting(
        "4k", "buffer for the response headers (one memory page)", f"{PROXY}#proxy_buffer_size")
    proxy_buffers_count: int = Field(8, ge=2, le=1024, description=f"number of body buffers ({PROXY}#proxy_buffers)")
    proxy_buffers_size: NginxSize = setting("4k", "size of each body buffer", f"{PROXY}#proxy_buffers")
    proxy_busy_buffers_size: NginxSize = setting(
        "8k", "buffers that may be busy sending to the client", f"{PROXY}#proxy_busy_buffers_size")
    client_max_body_size: NginxSize = setting(
        "1m", "largest request body (long prompts exceed 1m: 413 from nginx)",
        f"{HTTP_CORE}#client_max_body_size")

    # How nginx speaks to the upstream.
    proxy_http_version: Literal["1.0", "1.1"] | None = setting(
        None, "HTTP version towards the upstream (1.0: close-delimited replies, no keepalive; None: not "
              "written, the release's own: 1.0 until nginx 1.29.7, 1.1 since)",
        f"{PROXY}#proxy_http_version")
    proxy_connection_header: HeaderValue | None = setting(
        None, "the `Connection` header sent upstream (\"\" removes it; keepalive needs \"\"; None: not "
              "written, the release's own: close until nginx 1.29.7, none since)",
        f"{PROXY}#proxy_set_header")
    upstream_keepalive: int | None = Field(
        None, ge=0, le=65535, description="idle upstream connections kept per worker (0: no pool, "
        "1.29.7 and later; None: not written, the release's own: no pool until nginx 1.29.7, "
        f"`keepalive 32 local` since) ({UPSTREAM}#keepalive)")
    upstream_keepalive_timeout: NginxDuration = setting(
        "60s", "how long an idle upstream connection stays in the pool; keep it below the server's own "
        "keep-alive timeout (uvicorn: 5 s) or nginx reuses connections the server is closing",
        f"{UPSTREAM}#keepalive_timeout")

    # Retries: which failures nginx takes to the next peer of the upstream block.
    upstream_peers: int = Field(
        1, ge=1, le=8, description="`server` lines in the upstream block, each the lab's one server: "
        "nginx takes each line as a peer of its own, as it would two replicas, so a retry goes to the "
        f"next line ({UPSTREAM}#server)", json_schema_extra={"docs": f"{UPSTREAM}#server"})
    upstream_replica_ports: tuple[Port, ...] = Field(
        (), max_length=7, description="further replicas of the upstream, each a `server` line of its own "
        "on the upstream's host at these ports (an MCP origin's replicas; the model server runs once) "
        f"({UPSTREAM}#server)", json_schema_extra={"docs": f"{UPSTREAM}#server"})
    upstream_hash: Literal["$http_mcp_session_id", "$http_mcp_session_id consistent", "$remote_addr"] | None = setting(
        None, "balance by a hash of this key instead of round-robin (`consistent`: ketama, few keys move "
              "when a peer is added). `$http_mcp_session_id` keeps an MCP session's later requests together "
              "but not with its initialize, which carries no id (an empty key is balanced round-robin); "
              "`$remote_addr` keeps each client address on one peer", f"{UPSTREAM}#hash")
    proxy_next_upstream: tuple[NextUpstream, ...] = Field(
        ("error", "timeout"), min_length=1, description="the failures nginx retries on the next peer; "
        "`non_idempotent` lets it resend a POST that already reached a server (nginx's default never "
        f"does: the prompt would be prefilled twice) ({PROXY}#proxy_next_upstream)",
        json_schema_extra={"docs": f"{PROXY}#proxy_next_upstream"})

    # Timeouts.
    proxy_connect_timeout: NginxDuration = setting(
        "60s", "time to establish the upstream connection", f"{PROXY}#proxy_connect_timeout")
    proxy_read_timeout: NginxDuration = setting(
        "60s", "longest silence between two reads from the upstream (a longer silence cuts the stream)",
        f"{PROXY}#proxy_read_timeout")
    proxy_send_timeout: NginxDuration = setting(
        "60s", "longest pause between two writes to the upstream", f"{PROXY}#proxy_send_timeout")
    proxy_ignore_client_abort: bool = setting(
        False, "keep the upstream request when the client leaves (on: tokens generated for nobody)",
        f"{PROXY}#proxy_ignore_client_abort")

    # Clients: how long nginx waits for them (a slow or silent client holds a connection).
    client_header_timeout: NginxDuration = setting(
        "60s", "time to receive the request line and headers, and the first request on a new "
               "connection (a header trickle or a silent connection is closed after it)",
        f"{HTTP_CORE}#client_header_timeout")
    client_body_timeout: NginxDuration = setting(
        "60s", "longest pause between two reads of the request body (not the whole body)",
        f"{HTTP_CORE}#client_body_timeout")
    limit_conn_per_client: int | None = Field(
        None, ge=1, le=1_000_000, description="requests in flight from one client address (its "
        "uploads and its streams); beyond it 429 (None: no limit). nginx has no deadline for a whole "
        f"request body, so this is what bounds a client that trickles many ({LIMIT_CONN}#limit_conn)",
        json_schema_extra={"docs": f"{LIMIT_CONN}#limit_conn"})
    keepalive_timeout: NginxDuration = setting(
        "75s", "how long an idle client keep-alive connection stays open between requests",
        f"{HTTP_CORE}#keepalive_timeout")

    # What nginx says about itself.
    server_tokens: bool = setting(
        True, "announce nginx's version in the Server header and on error pages",
        f"{HTTP_CORE}#server_tokens")
    json_errors: bool = json_errors_setting("nginx", "HTML pages", f"{HTTP_CORE}#error_page")
    # A WAF, said and not run: the template has no ModSecurity settings (docs/proxies.md's WAF section).
    modsecurity_note: bool = setting(
        False, "a comment block: how to load the ModSecurity v3 connector, and what it does to a stream "
               "(measured: nothing held)", "https://github.com/owasp-modsecurity/ModSecurity-nginx#usage")
    # TLS with HTTP/2: every stream of a client shares one connection (browsers allow only six
    # HTTP/1.1 connections per origin). Without certificate paths, one is made at run time.
    tls_http2: bool = setting(
        False, "listen with TLS and HTTP/2 instead of plain HTTP/1.1", f"{HTTP_CORE}#listen")
    ssl_certificate: FilePath | None = setting(
        None, "certificate file, PEM, the chain after it (None with tls_http2: a self-signed one "
              "made at run time)", f"{SSL}#ssl_certificate")
    ssl_certificate_key: FilePath | None = setting(
        None, "its private key, PEM (named with the certificate, or both left unset)",
        f"{SSL}#ssl_certificate_key")
    ssl_protocols: tuple[Literal["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"], ...] = Field(
        ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"), min_length=1,
        description=f"TLS versions offered (nginx 1.22 still enables 1.0 and 1.1) ({SSL}#ssl_protocols)",
        json_schema_extra={"docs": f"{SSL}#ssl_protocols"})
    ssl_session_cache: SslSessionCache = setting(
        "none", "TLS session resumption: `shared:NAME:SIZE` lets a reconnecting client skip the "
                "full handshake on every worker (1 MB holds about 4,000 sessions)",
        f"{SSL}#ssl_session_cache")
    http2_max_concurrent_streams: int = Field(
        128, ge=1, le=65535, description="streams one HTTP/2 connection may carry at once; a "
        f"client queues the rest ({HTTP2}#http2_max_concurrent_streams)",
        json_schema_extra={"docs": f"{HTTP2}#http2_max_concurrent_streams"})

    @model_validator(mode="before")
    @classmethod
    def _certificate_when_tls(cls, data: Any) -> Any:
        return fill_certificate(data, "tls_http2", *cls.tls_fields)

    # Compression.
    gzip: bool = setting(False, "gzip responses", f"{GZIP}#gzip")
    gzip_types: tuple[MimeType, ...] = setting(
        (), "types compressed besides text/html, which gzip always compresses", f"{GZIP}#gzip_types")

    # Where the error answers live inside nginx (`internal`: a client asking for them gets 404).
    error_uri_prefix: ClassVar[str] = "/.proxy-error/"

    @property
    def error_pages(self) -> list[tuple[int, ProxyError]]:
        """(status nginx produces, the answer it gives instead) for each of nginx's own errors.
        494 is nginx's internal code for headers too large (sent as 400): answered as 431."""
        if not self.json_errors:
            return []
        statuses = sorted((*NGINX_OWN_ERRORS, 429)) if self.limit_conn_per_client else NGINX_OWN_ERRORS
        return [(status, ERRORS[431 if status == 494 else status]) for status in statuses]

    @field_validator("proxy_next_upstream")
    @classmethod
    def _off_alone(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        if "off" in words and len(words) > 1:
            raise ValueError(f"proxy_next_upstream {' '.join(words)}: `off` stands alone")
        return words

    @field_validator("gzip_types")
    @classmethod
    def _drop_implicit_types(cls, types: tuple[str, ...]) -> tuple[str, ...]:
        # nginx warns on a repeated type, and text/html is always in the list.
        return tuple(dict.fromkeys(t for t in types if t != "text/html"))
