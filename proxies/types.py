"""Validated value types shared by the settings models.

Every string a template prints goes through one of these, so no setting can smuggle a directive,
a quote, a newline or a YAML key into a rendered config: each type is a `fullmatch` against a
narrow pattern, and pydantic names the offending field in the error.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Callable

from pydantic import AfterValidator, BeforeValidator, Field

Port = Annotated[int, Field(ge=1, le=65535)]

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_MIME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}/[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
_HEADER_VALUE = re.compile(r"[A-Za-z0-9 ,_.-]{0,64}")
_FILE_PATH = re.compile(r"/[A-Za-z0-9._/-]{1,255}")
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")
_CORS_ORIGIN = re.compile(r"\*|https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?")


def _pattern(regex: re.Pattern[str], what: str, example: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(f"{value!r} is not {what} (for example {example!r})")
        return value
    return check


def _host(value: str) -> str:
    """An IPv4 address or a DNS name: what every template can print as `HOST:PORT`."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        if _HOSTNAME.fullmatch(value) and not value.replace(".", "").isdigit():
            return value
        raise ValueError(f"{value!r} is not an IPv4 address or a host name") from None
    if address.version != 4:
        raise ValueError(f"{value!r}: only IPv4 addresses are supported (IPv6 needs per-proxy brackets)")
    return value


Host = Annotated[str, AfterValidator(_host)]
MimeType = Annotated[str, AfterValidator(_pattern(_MIME, "a MIME type", "application/json"))]
HeaderValue = Annotated[str, AfterValidator(_pattern(_HEADER_VALUE, "a plain header value",
                                                     "keep-alive"))]
HeaderName = Annotated[str, AfterValidator(_pattern(_HEADER_NAME, "a header name", "Mcp-Session-Id"))]
# What Access-Control-Allow-Origin takes: one origin, or `*` (any, without credentials).
CorsOrigin = Annotated[str, AfterValidator(_pattern(_CORS_ORIGIN, "`*` or an origin", "https://app.example.com"))]
FilePath = Annotated[str, AfterValidator(_pattern(_FILE_PATH, "an absolute file path",
                                                  "/etc/ssl/certs/proxy.pem"))]

# A proxy release by its major.minor (proxies.releases.Release.series), e.g. "1.30".
Series = Annotated[str, AfterValidator(_pattern(re.compile(r"\d{1,3}\.\d{1,3}"), "a major.minor version", "1.30"))]

# nginx's ssl_session_cache: https://nginx.org/en/docs/http/ngx_http_ssl_module.html#ssl_session_cache
SslSessionCache = Annotated[str, AfterValidator(_pattern(
    re.compile(r"off|none|shared:[A-Za-z0-9_]{1,32}:\d{1,6}[kKmM]?"), "an nginx session cache",
    "shared:SSL:10m"))]


def _seconds_to_text(style: str) -> Callable[[object], object]:
    """Accept a number of seconds as well as the proxy's own duration text."""
    def convert(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        if value < 0:
            raise ValueError(f"{value!r}: a duration cannot be negative")
        if style == "protobuf":  # Envoy: google.protobuf.Duration in JSON form
            return f"{value:.9f}".rstrip("0").rstrip(".") + "s"
        millis = round(value * 1000)
        return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"
    return convert


# nginx: https://nginx.org/en/docs/syntax.html (one unit; ms, s, m, h, d, w, M, y; none = seconds)
NginxDuration = Annotated[
    str, BeforeValidator(_seconds_to_text("unit")),
    AfterValidator(_pattern(re.compile(r"\d{1,9}(?:ms|s|m|h|d|w|M|y)?"), "an nginx time", "60s"))]
# nginx sizes: https://nginx.org/en/docs/syntax.html (bytes, k, m, g)
NginxSize = Annotated[
    str, AfterValidator(_pattern(re.compile(r"\d{1,12}[kKmMgG]?"), "an nginx size", "8k"))]
# HAProxy: "Time format" in https://docs.haproxy.org/2.6/configuration.html#2.5
HaproxyDuration = Annotated[
    str, BeforeValidator(_seconds_to_text("unit")),
    AfterValidator(_pattern(re.compile(r"\d{1,9}(?:us|ms|s|m|h|d)?"), "an HAProxy time", "30s"))]
# Envoy: google.protobuf.Duration as JSON/YAML text, e.g. "15s", "0.250s"
EnvoyDuration = Annotated[
    str, BeforeValidator(_seconds_to_text("protobuf")),
    AfterValidator(_pattern(re.compile(r"\d{1,9}(?:\.\d{1,9})?s"), "a protobuf duration", "15s"))]
# Varnish VCL durations: https://varnish-cache.org/docs/7.1/reference/vcl.html#durations
VarnishDuration = Annotated[
    str, BeforeValidator(_seconds_to_text("unit")),
    AfterValidator(_pattern(re.compile(r"\d{1,9}(?:\.\d{1,3})?(?:ms|s|m|h|d|w|y)"), "a VCL duration", "60s"))]
# Go durations (https://pkg.go.dev/time#ParseDuration), e.g. "10s", "500ms"; -1 where a negative
# value means "at once" (a flush interval). Caddy (https://caddyserver.com/docs/conventions#durations)
# and Traefik read them.
GoDuration = Annotated[
    str, BeforeValidator(_seconds_to_text("unit")),
    AfterValidator(_pattern(re.compile(r"-1|\d{1,9}(?:ns|us|ms|s|m|h)"), "a Go duration (or -1)", "10s"))]
CaddyDuration = Annotated[
    str, BeforeValidator(_seconds_to_text("unit")),
    AfterValidator(_pattern(re.compile(r"-1|\d{1,9}(?:ns|us|ms|s|m|h|d)"), "a Caddy duration (or -1)", "10s"))]
