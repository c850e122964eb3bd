"""Caddy settings (`reverse_proxy` in front of the server), defaulting to Caddy 2.6's own.

The admin API and automatic HTTPS are always off: the lab listens on plain HTTP on loopback and
nothing may reconfigure a running proxy.
"""
from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from proxies.base import ProxySettings, setting
from proxies.errors import FALLBACK_SERVER, ProxyError, errors_for, json_errors_setting
from proxies.types import CaddyDuration

DOCS = "https://caddyserver.com/docs/caddyfile"
PROXY = f"{DOCS}/directives/reverse_proxy"
ENCODE = f"{DOCS}/directives/encode"
OPTIONS = f"{DOCS}/options"
# Statuses Caddy answers on its own in front of one upstream.
CADDY_OWN_ERRORS = (413, 500, 502, 503, 504)


class CaddySettings(ProxySettings):
    proxy: ClassVar = "caddy"
    template: ClassVar[str] = "caddy/Caddyfile.j2"
    config_name: ClassVar[str] = "Caddyfile"

    # Compression.
    encode: tuple[Literal["gzip", "zstd"], ...] = setting(
        (), "encodings `encode` offers (empty: no encode directive)", ENCODE)
    encode_skip_event_streams: bool = setting(
        False, "the encode directive gets a request matcher that skips requests accepting "
               "text/event-stream", f"{DOCS}/matchers")
    flush_interval: Optional[CaddyDuration] = setting(
        None, "how often reverse_proxy flushes (None: Caddy's default; text/event-stream answers "
              "are flushed at once anyway; -1: after every write)",
        f"{PROXY}#streaming")

    # Towards the upstream (transport http; None: Caddy's defaults).
    dial_timeout: Optional[CaddyDuration] = setting(
        None, "time to connect to the server (None: 3s)", f"{PROXY}#http")
    response_header_timeout: Optional[CaddyDuration] = setting(
        None, "time to wait for the server's headers (None: no limit)", f"{PROXY}#http")
    read_timeout: Optional[CaddyDuration] = setting(
        None, "longest wait for a read from the server (None: no limit)", f"{PROXY}#http")

    # Slow and silent clients (server options; None: Caddy's defaults).
    read_header_timeout: Optional[CaddyDuration] = setting(
        None, "time to read the request headers (None: no limit)", f"{OPTIONS}#timeouts")
    idle_timeout: Optional[CaddyDuration] = setting(
        None, "idle keep-alive connection lifetime (None: 5m)", f"{OPTIONS}#timeouts")

    # Requests Caddy refuses itself, and how it says so.
    max_body_bytes: Optional[int] = Field(
        None, ge=1, le=1 << 40,
        description=f"larger request bodies get 413 (None: no limit) ({DOCS}/directives/request_body)")
    json_errors: bool = json_errors_setting("Caddy", "empty bodies", f"{DOCS}/directives/handle_errors")

    @property
    def error_pages(self) -> list[ProxyError]:
        return errors_for(CADDY_OWN_ERRORS) if self.json_errors else []

    @property
    def fallback(self) -> ProxyError:
        """The answer for any other status Caddy produces itself."""
        return FALLBACK_SERVER
