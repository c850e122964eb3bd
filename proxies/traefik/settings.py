"""Traefik settings (an entry point, a router and a load-balanced service in front of the server),
defaulting to Traefik 3.7's own.

One file holds both halves of Traefik's configuration: the static part (entry point, providers,
logs) and the dynamic part (`http:` routers, middlewares, services) that its file provider reads
from the same file. The dashboard, the API, the version check and anonymous usage statistics are
always off: the lab listens on loopback and contacts nothing else.
"""
from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field, model_validator

from proxies.base import ProxySettings, setting
from proxies.logs import READY_PATH
from proxies.types import GoDuration, MimeType
from typing_extensions import Self

DOCS = "https://doc.traefik.io/traefik/v3.7"
ENTRYPOINTS = f"{DOCS}/reference/install-configuration/entrypoints"
SERVICES = f"{DOCS}/reference/routing-configuration/http/load-balancing/service"
TRANSPORT = f"{DOCS}/reference/routing-configuration/http/load-balancing/serverstransport"
MIDDLEWARES = f"{DOCS}/reference/routing-configuration/http/middlewares"


class TraefikSettings(ProxySettings):
    proxy: ClassVar = "traefik"
    template: ClassVar[str] = "traefik/traefik.yml.j2"
    config_name: ClassVar[str] = "traefik.yml"

    # The entry point: how long a client may take, and how long a response may last.
    read_timeout: Optional[GoDuration] = setting(
        None, "entry point respondingTimeouts.readTimeout: the whole request, headers and body, "
              "must arrive within it (None: 60s)", f"{ENTRYPOINTS}/#opt-transport-respondingTimeouts-readTimeout")
    write_timeout: Optional[GoDuration] = setting(
        None, "entry point respondingTimeouts.writeTimeout: the whole response must be written "
              "within it, however it streams (None: 0s, no limit)",
        f"{ENTRYPOINTS}/#opt-transport-respondingTimeouts-writeTimeout")
    idle_timeout: Optional[GoDuration] = setting(
        None, "entry point respondingTimeouts.idleTimeout: an idle keep-alive connection is closed "
              "after it (None: 180s)", f"{ENTRYPOINTS}/#opt-transport-respondingTimeouts-idleTimeout")

    # The service: how responses are forwarded.
    flush_interval: Optional[GoDuration] = setting(
        None, "loadBalancer responseForwarding.flushInterval: how often a response is flushed to "
              "the client (None: 100ms; -1: after every write; text/event-stream answers are flushed "
              "at once whatever it says)", f"{SERVICES}/#opt-responseForwarding-flushInterval")

    # Towards the upstream (a serversTransport's forwardingTimeouts; None: Traefik's defaults).
    dial_timeout: Optional[GoDuration] = setting(
        None, "time to connect to the server (None: 30s)", f"{TRANSPORT}/#opt-forwardingTimeouts-dialTimeout")
    response_header_timeout: Optional[GoDuration] = setting(
        None, "time to wait for the server's headers once the request is sent (None: 0s, no "
              "limit)", f"{TRANSPORT}/#opt-forwardingTimeouts-responseHeaderTimeout")
    idle_conn_timeout: Optional[GoDuration] = setting(
        None, "an idle pooled upstream connection is closed after it (None: 90s)",
        f"{TRANSPORT}/#opt-forwardingTimeouts-idleConnTimeout")

    # Middlewares on the router.
    compress: bool = setting(False, "the compress middleware (gzip, brotli, zstd by Accept-Encoding)",
                             f"{MIDDLEWARES}/compress/")
    compress_included_types: tuple[MimeType, ...] = setting(
        (), "the only content types compress compresses (empty: every type but the excluded)",
        f"{MIDDLEWARES}/compress/#opt-includedContentTypes")
    compress_excluded_types: tuple[MimeType, ...] = setting(
        (), "content types compress leaves alone (empty: its default list, which has none of the "
            "stream types)", f"{MIDDLEWARES}/compress/#opt-excludedContentTypes")
    compress_min_bytes: Optional[int] = Field(
        None, ge=0, le=1 << 30,
        description=f"compress minResponseBodyBytes (None: 1024) ({MIDDLEWARES}/compress/#opt-minResponseBodyBytes)")
    max_body_bytes: Optional[int] = Field(
        None, ge=1, le=1 << 40,
        description="larger request bodies get 413 from the buffering middleware, which also holds "
                    "the whole response until it ends: a stream arrives in one lump (a file cannot "
                    "turn its response buffer off) (None: no limit, no buffering) "
                    f"({MIDDLEWARES}/buffering/#opt-maxRequestBodyBytes)")
    retry_attempts: Optional[int] = Field(
        None, ge=1, le=10,
        description=f"the retry middleware's attempts (None: no retry middleware) ({MIDDLEWARES}/retry/#opt-attempts)")

    # Static, like the entry point: how requests are forwarded to plain-HTTP servers.
    fast_proxy: bool = setting(
        False, "experimental.fastProxy: Traefik's fasthttp proxy to HTTP/1.1 servers instead of Go's "
               "(h2c and TLS servers keep Go's)",
        f"{DOCS}/reference/install-configuration/experimental/fastproxy/")

    log_level: Literal["TRACE", "DEBUG", "INFO", "WARN", "ERROR"] = setting(
        "ERROR", "Traefik's own log level (its log goes to stdout)",
        f"{DOCS}/reference/install-configuration/observability/logs-and-accesslogs/")

    @property
    def ready_path(self) -> str:
        """The path of the router that answers the lab's readiness probe."""
        return READY_PATH

    @model_validator(mode="after")
    def _one_type_list(self) -> Self:
        if self.compress_included_types and self.compress_excluded_types:
            raise ValueError("compress takes includedContentTypes or excludedContentTypes, not both")
        return self
