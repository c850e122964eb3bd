"""Caddy settings (`reverse_proxy` in front of the server), defaulting to Caddy 2.6's own.

The admin API and automatic HTTPS are always off: the lab listens on plain HTTP on loopback and
nothing may reconfigure a running proxy.
"""
from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field, model_validator
from typing_extensions import Self

from proxies.base import ProxySettings, setting
from proxies.errors import FALLBACK_SERVER, ProxyError, errors_for, json_errors_setting
from proxies.types import CaddyDuration, MimeType

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
    encode_types: tuple[MimeType, ...] = setting(
        (), "response Content-Types encode compresses (`match { header Content-Type ... }`; "
            "empty: Caddy's own list, whose text/* takes event streams too)", ENCODE)
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

    h2c: bool = setting(
        False, "also speak HTTP/2 by prior knowledge on the plain listener (`protocols h1 h2 h2c`; "
               "off: Caddy's own, HTTP/1.1 only on plain HTTP before 2.11)", f"{OPTIONS}#protocols")

    # Slow and silent clients (server options; None: Caddy's defaults).
    read_header_timeout: Optional[CaddyDuration] = setting(
        None, "time to read the request headers (None: no limit)", f"{OPTIONS}#timeouts")
    idle_timeout: Optional[CaddyDuration] = setting(
        None, "idle keep-alive connection lifetime (None: 5m)", f"{OPTIONS}#timeouts")
    read_body_timeout: Optional[CaddyDuration] = setting(
        None, "time to read a whole request, headers and body, from the first byte (Go's "
              "ReadTimeout; None: no limit)", f"{OPTIONS}#timeouts")

    # Requests Caddy refuses itself, and how it says so.
    max_body_bytes: Optional[int] = Field(
        None, ge=1, le=1 << 40,
        description=f"larger request bodies get 413: by the Content-Length before anything is "
                    f"forwarded, a chunked one when the count reaches it (None: no limit) "
                    f"({DOCS}/directives/request_body)")
    buffer_requests: bool = setting(
        False, "a request with a Content-Length is read whole (already checked against "
               "max_body_bytes) before the server is dialed (Caddy 2.6's buffer_requests); chunked "
               "ones are forwarded as they come either way, as Caddy 2.6.2 would forward a chunked "
               "body cut at max_size as if whole (off: every body is forwarded as it comes)",
        f"{PROXY}#streaming")
    json_errors: bool = json_errors_setting("Caddy", "empty bodies", f"{DOCS}/directives/handle_errors")

    @model_validator(mode="after")
    def _buffer_within_the_limit(self) -> Self:
        if self.buffer_requests and self.max_body_bytes is None:
            raise ValueError("buffer_requests holds bodies up to max_body_bytes: set it")
        return self

    @property
    def too_large_pattern(self) -> str:
        """A regular expression for the Content-Length values above max_body_bytes (leading
        zeros allowed)."""
        return above_pattern(self.max_body_bytes or 0)

    @property
    def error_pages(self) -> list[ProxyError]:
        return errors_for(CADDY_OWN_ERRORS) if self.json_errors else []

    @property
    def fallback(self) -> ProxyError:
        """The answer for any other status Caddy produces itself."""
        return FALLBACK_SERVER


def above_pattern(limit: int) -> str:
    """A regular expression matching the decimal numbers greater than `limit`: more digits, or
    as many with a larger digit after a common prefix (no `{n}` counts: braces are Caddyfile
    placeholders)."""
    digits = str(limit)
    longer = ["[1-9]" + "[0-9]" * (len(digits) - 1) + "[0-9]+"]
    same = [digits[:i] + ("9" if d == "8" else f"[{int(d) + 1}-9]") + "[0-9]" * (len(digits) - i - 1)
            for i, d in enumerate(digits) if d != "9"]
    return "^0*(" + "|".join(longer + same) + ")$"
