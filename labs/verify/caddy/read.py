"""What is in effect on the Caddy route that serves the chat request (labs/verify/caddy/routes.py
finds it): the `reverse_proxy` handler and its transport, the `encode` handlers that run before
it, the server's timeouts. Where nothing sets a value, Caddy 2.6's default applies (DOCS).

`where`: the user's file and line (config.CaddyConfig.line_of: the directive searched in its
block, or the site block's line when nothing better is found).
"""
from __future__ import annotations

import fnmatch
from typing import Any

from labs.verify.caddy.config import CaddyConfig, duration_text, seconds
from labs.verify.caddy.routes import Found
from labs.verify.model import Setting
from labs.verify.reader import InEffect
from labs.verify.rules import SSE

DOCS = {
    "reverse_proxy": "https://caddyserver.com/docs/caddyfile/directives/reverse_proxy",
    "transport": "https://caddyserver.com/docs/caddyfile/directives/reverse_proxy#the-http-transport",
    "encode": "https://caddyserver.com/docs/caddyfile/directives/encode",
    "timeouts": "https://caddyserver.com/docs/caddyfile/options#timeouts",
}
# encode's match when none is written (Caddy's encode.go Provision): text/* is one of them.
ENCODE_DEFAULT_TYPES = ("text/*", "application/json*", "application/javascript*", "application/xml*",
                        "image/svg+xml*", "...")
ENCODE_MIN_LENGTH = 512
# (setting, JSON key in transport, Caddyfile word, default text)
TRANSPORT = (("read_timeout", "read_timeout", "none"), ("write_timeout", "write_timeout", "none"),
             ("dial_timeout", "dial_timeout", "3s"), ("response_header_timeout", "response_header_timeout", "none"),
             ("max_conns_per_host", "max_conns_per_host", "0"))
# (setting, JSON key of the server, the word inside the global `servers { timeouts { } }`, default)
SERVER = (("server read_timeout", "read_timeout", "read_body", "none"),
          ("server read_header_timeout", "read_header_timeout", "read_header", "none"),
          ("server write_timeout", "write_timeout", "write", "none"),
          ("server idle_timeout", "idle_timeout", "idle", "5m"))


def settings(config: CaddyConfig, found: Found) -> InEffect:
    """Every streaming setting in effect on the reverse_proxy `found` (routes.match's)."""
    server = config.servers[found.server]
    site, handler, proxy_line = found.site, found.handler, found.proxy_line
    in_effect: dict[str, Setting] = {}
    at = (lambda word, line=proxy_line: _where(config, word, line))
    flush = handler.get("flush_interval")
    in_effect["flush_interval"] = (
        Setting("flush_interval", seconds(flush), f"flush_interval {duration_text(flush)}", at("flush_interval"))
        if flush is not None else Setting("flush_interval", None,
                                          "flush_interval (unset: text/event-stream answers flushed at once)"))
    buffers = handler.get("response_buffers", -1 if handler.get("buffer_responses") else None)
    word = "response_buffers" if "response_buffers" in handler else "buffer_responses"
    in_effect["response_buffers"] = (
        Setting("response_buffers", buffers, config.line_text(_line(config, word, proxy_line))
                or f"{word} {buffers}", at(word)) if buffers else
        Setting("response_buffers", 0, "response_buffers (unset: not buffered)"))
    requests = handler.get("request_buffers", -1 if handler.get("buffer_requests") else None)
    in_effect["request_buffers"] = (
        Setting("request_buffers", requests, f"request_buffers {requests}", at("request_buffers")) if requests
        else Setting("request_buffers", 0, "request_buffers (unset: streamed)"))
    transport = handler.get("transport") or {}
    for name, key, default in TRANSPORT:
        value = transport.get(key)
        if value is None:
            in_effect[name] = Setting(name, None, f"{name} {default} (default)")
        else:
            shown = str(value) if key == "max_conns_per_host" else duration_text(value)
            number = value if key == "max_conns_per_host" else seconds(value)
            in_effect[name] = Setting(name, number, f"{name} {shown}", at(key))
    lb = (handler.get("load_balancing") or {}).get("try_duration")
    in_effect["lb_try_duration"] = (
        Setting("lb_try_duration", seconds(lb), f"lb_try_duration {duration_text(lb)}", at("lb_try_duration"
                if config.caddyfile else "try_duration")) if lb else
        Setting("lb_try_duration", 0, "lb_try_duration 0 (default: no retries)"))
    timeouts = config.line_of("timeouts") if config.caddyfile else None
    for name, key, word, default in SERVER:
        value = server.get(key)
        if value is None:
            in_effect[name] = Setting(name, None, f"{word} {default} (default)")
        else:
            line = (config.line_of(word, timeouts) if timeouts else None) if config.caddyfile else \
                config.line_of(key, config.line_of(found.server))
            in_effect[name] = Setting(name, seconds(value), f"timeouts {{ {word} {duration_text(value)} }}"
                                      if config.caddyfile else f"{key} {duration_text(value)}", config.where(line))
    in_effect["encode"] = encode_setting(config, found, site)
    return InEffect(in_effect, ["Caddy's defaults: " + ", ".join(DOCS.values())])


def encode_setting(config: CaddyConfig, found: Found, site: int | None) -> Setting:
    """The encode handlers that run before the proxy: do they compress text/event-stream?"""
    encoders = [h for h in found.before if h.get("handler") == "encode"]
    if not encoders:
        return Setting("encode", None, "encode (none on the route: not compressed)")
    encoder = encoders[-1]
    names = sorted(encoder.get("encodings") or {})
    types = _content_types(encoder)
    minimum = encoder.get("minimum_length") or ENCODE_MIN_LENGTH
    matched = any(_type_matches(t, SSE) for t in types)
    value = {"encodings": names, "types": types, "minimum_length": minimum, "event_streams": matched,
             "defaults": "match" not in encoder}
    line = config.line_of("encode", site) if config.caddyfile else config.line_of("encodings", site)
    text = (config.line_text(line) if config.caddyfile and line else None) or f"encode {' '.join(names)}"
    if value["defaults"]:
        text += " (default match: text/* among its types)"
    return Setting("encode", value, text, config.where(line or site))


def _content_types(encoder: dict[str, Any]) -> list[str]:
    match = encoder.get("match")
    if match is None:
        return list(ENCODE_DEFAULT_TYPES)
    headers = match.get("headers") or {}
    for name, values in headers.items():
        if name.lower() == "content-type":
            return list(values or [])
    return ["*"] if not match.get("status_code") else ["*"]


def _type_matches(pattern: str, content_type: str) -> bool:
    return fnmatch.fnmatchcase(content_type, pattern.lower()) or pattern == "*"


def _where(config: CaddyConfig, word: str, within: int | None) -> str:
    return config.where(_line(config, word, within))


def _line(config: CaddyConfig, word: str, within: int | None) -> int | None:
    return config.line_of(word, within) or within
