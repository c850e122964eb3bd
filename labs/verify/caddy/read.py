"""What is in effect on the Caddy route that serves the chat request (labs/verify/caddy/routes.py
finds it): the `reverse_proxy` handler and its transport, the `encode` handlers that run before
it, the server's timeouts. Where nothing sets a value, Caddy 2.6's default applies (DOCS).

`where`: the user's file and line (config.CaddyConfig.line_of: the directive searched in its
block, or the site block's line when nothing better is found).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from labs.verify.caddy.config import CaddyConfig, duration_text, parse, seconds
from labs.verify.caddy.routes import Found, describe_handler, describe_matcher, select_route
from labs.verify.model import DEFAULT, Reading, RouteWanted, Setting

DOCS = {
    "reverse_proxy": "https://caddyserver.com/docs/caddyfile/directives/reverse_proxy",
    "transport": "https://caddyserver.com/docs/caddyfile/directives/reverse_proxy#the-http-transport",
    "encode": "https://caddyserver.com/docs/caddyfile/directives/encode",
    "timeouts": "https://caddyserver.com/docs/caddyfile/options#timeouts",
}
SSE = "text/event-stream"
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


def read(path: Path, wanted: RouteWanted = RouteWanted()) -> Reading:
    config = parse(path, wanted.series)
    found, request_path, why = select_route(config, wanted)
    server = config.servers[found.server]
    site = site_line(config, found)
    handler = found.handler
    proxy_line = config.line_of("reverse_proxy" if config.caddyfile else "handler", site,
                                contains=None if not config.caddyfile else _dial_host(handler))
    if proxy_line is None and not config.caddyfile:
        proxy_line = config.line_of("handler", site, contains="reverse_proxy")
    proxy_line = proxy_line or site
    host = wanted.host or next((_concrete(h) for h in found.hosts), None)
    reading = Reading(proxy="caddy", file=path, route=describe(config, found, site, proxy_line),
                      path=request_path, host=host, why=why, routes=_routes(config),
                      scope=f"the reverse_proxy at {config.where(proxy_line)}")
    at = (lambda word, line=proxy_line: _where(config, word, line))
    flush = handler.get("flush_interval")
    reading.settings["flush_interval"] = (
        Setting("flush_interval", seconds(flush), f"flush_interval {duration_text(flush)}", at("flush_interval"))
        if flush is not None else Setting("flush_interval", None,
                                          "flush_interval (unset: text/event-stream answers flushed at once)"))
    buffers = handler.get("response_buffers", -1 if handler.get("buffer_responses") else None)
    word = "response_buffers" if "response_buffers" in handler else "buffer_responses"
    reading.settings["response_buffers"] = (
        Setting("response_buffers", buffers, config.line_text(_line(config, word, proxy_line))
                or f"{word} {buffers}", at(word)) if buffers else
        Setting("response_buffers", 0, "response_buffers (unset: not buffered)"))
    requests = handler.get("request_buffers", -1 if handler.get("buffer_requests") else None)
    reading.settings["request_buffers"] = (
        Setting("request_buffers", requests, f"request_buffers {requests}", at("request_buffers")) if requests
        else Setting("request_buffers", 0, "request_buffers (unset: streamed)"))
    transport = handler.get("transport") or {}
    for name, key, default in TRANSPORT:
        value = transport.get(key)
        if value is None:
            reading.settings[name] = Setting(name, None, f"{name} {default} (default)")
        else:
            shown = str(value) if key == "max_conns_per_host" else duration_text(value)
            number = value if key == "max_conns_per_host" else seconds(value)
            reading.settings[name] = Setting(name, number, f"{name} {shown}", at(key))
    lb = (handler.get("load_balancing") or {}).get("try_duration")
    reading.settings["lb_try_duration"] = (
        Setting("lb_try_duration", seconds(lb), f"lb_try_duration {duration_text(lb)}", at("lb_try_duration"
                if config.caddyfile else "try_duration")) if lb else
        Setting("lb_try_duration", 0, "lb_try_duration 0 (default: no retries)"))
    timeouts = config.line_of("timeouts") if config.caddyfile else None
    for name, key, word, default in SERVER:
        value = server.get(key)
        if value is None:
            reading.settings[name] = Setting(name, None, f"{word} {default} (default)")
        else:
            line = (config.line_of(word, timeouts) if timeouts else None) if config.caddyfile else \
                config.line_of(key, config.line_of(found.server))
            reading.settings[name] = Setting(name, seconds(value), f"timeouts {{ {word} {duration_text(value)} }}"
                                             if config.caddyfile else f"{key} {duration_text(value)}",
                                             config.where(line))
    reading.settings["encode"] = encode_setting(config, found, site)
    if found.unknown:
        reading.notes.append(f"matchers not evaluated here ({', '.join(sorted(set(found.unknown)))}): "
                             "taken as matching")
    reading.notes.append("Caddy's defaults: " + ", ".join(DOCS.values()))
    return reading


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
    import fnmatch
    return fnmatch.fnmatchcase(content_type, pattern.lower()) or pattern == "*"


def site_line(config: CaddyConfig, found: Found) -> int | None:
    server = config.servers[found.server]
    if config.caddyfile:
        return config.site_line(found.hosts, server.get("listen") or [])
    return config.line_of(found.server)


def _where(config: CaddyConfig, word: str, within: int | None) -> str:
    return config.where(_line(config, word, within))


def _line(config: CaddyConfig, word: str, within: int | None) -> int | None:
    return config.line_of(word, within) or within


def _dial_host(handler: dict[str, Any]) -> str | None:
    dials = [u.get("dial") for u in handler.get("upstreams") or [] if u.get("dial")]
    return dials[0].rsplit(":", 1)[0].strip("[]") if dials else None


def _concrete(host: str) -> str:
    return "verify." + host[2:] if host.startswith("*.") else host


def describe(config: CaddyConfig, found: Found, site: int | None, proxy_line: int | None) -> str:
    server = config.servers[found.server]
    shown = f"server {found.server} listen {' '.join(server.get('listen') or [])}"
    if site:
        shown += f" ({config.where(site)})"
    for kind, part in found.chain:
        matcher = describe_matcher(part) if kind == "route" else ""
        if matcher:
            shown += f" > {matcher}"
    return shown + f" > {describe_handler(found.handler)} ({config.where(proxy_line)})"


def _routes(config: CaddyConfig) -> list[str]:
    from labs.verify.caddy.routes import _handlers
    return [f"server {name}: {describe_handler(h)}" for name, server in config.servers.items()
            for h in _handlers(server.get("routes") or []) if h.get("handler") == "reverse_proxy"]


__all__ = ["read", "DEFAULT"]
