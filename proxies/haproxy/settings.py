"""HAProxy settings: every knob the catalogue switches, defaulting to HAProxy 2.6's own defaults."""
from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from proxies.base import ProxySettings, setting
from proxies.types import HaproxyDuration, MimeType

DOCS = "https://docs.haproxy.org/2.6/configuration.html"

Maxconn = Optional[int]


class HaproxySettings(ProxySettings):
    proxy: ClassVar = "haproxy"
    template: ClassVar[str] = "haproxy/haproxy.cfg.j2"
    config_name: ClassVar[str] = "haproxy.cfg"

    # Concurrency: each stream holds one frontend and one backend connection for its whole life.
    maxconn_global: Maxconn = Field(
        None, ge=1, le=1_000_000,
        description=f"process-wide connection limit (None: derived from `ulimit -n`) ({DOCS}#3.2-maxconn)")
    maxconn_frontend: Maxconn = Field(
        None, ge=1, le=1_000_000,
        description=f"frontend limit; extra connections wait in the accept queue, unanswered "
                    f"(None: the global maxconn) ({DOCS}#4.2-maxconn)")
    maxconn_server: Maxconn = Field(
        None, ge=1, le=1_000_000,
        description=f"concurrent requests sent to the server; the rest queue in HAProxy "
                    f"(None: unlimited) ({DOCS}#5.2-maxconn)")

    # Latency of each event.
    http_no_delay: bool = setting(
        False, "send each chunk at once; without it HAProxy sends with MSG_MORE and events "
               "leave in groups", f"{DOCS}#4.2-option%20http-no-delay")
    abortonclose: bool = setting(
        False, "abort the server request as soon as the client closes (otherwise noticed only "
               "when a write fails)", f"{DOCS}#4.2-option%20abortonclose")

    # Compression.
    compression_algo: Optional[Literal["gzip", "deflate", "raw-deflate", "identity"]] = setting(
        None, "compression algorithm (None: no compression)", f"{DOCS}#4.2-compression")
    compression_types: tuple[MimeType, ...] = setting(
        (), "MIME types to compress (empty: every type)", f"{DOCS}#4.2-compression")

    # Timeouts (HAProxy has none by default and warns; None keeps it that way).
    timeout_connect: Optional[HaproxyDuration] = setting(
        None, "time to connect to the server", f"{DOCS}#4.2-timeout%20connect")
    timeout_client: Optional[HaproxyDuration] = setting(
        None, "client inactivity (had no effect on SSE responses in our measurements)",
        f"{DOCS}#4.2-timeout%20client")
    timeout_server: Optional[HaproxyDuration] = setting(
        None, "longest silence from the server: a longer one cuts the stream",
        f"{DOCS}#4.2-timeout%20server")
    timeout_tunnel: Optional[HaproxyDuration] = setting(
        None, "inactivity of tunnelled (upgraded/CONNECT) connections", f"{DOCS}#4.2-timeout%20tunnel")

    # Server-side connection reuse.
    http_reuse: Literal["never", "safe", "aggressive", "always"] = setting(
        "safe", "when idle server connections are shared between requests", f"{DOCS}#4.2-http-reuse")
