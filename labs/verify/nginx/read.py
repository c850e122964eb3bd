"""Which nginx server and location serve `POST /v1/chat/completions`, and what is in effect there.

Settings are inherited main -> http -> server -> location (nested locations too): the innermost
level that sets a directive wins; array directives (`proxy_set_header`) are inherited only by a
level that sets none of its own. Where nothing sets a directive, nginx 1.22's default applies.
"""
from __future__ import annotations

import re
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.model import DEFAULT, ROUTE_PATH, Reading, Setting, display_path
from labs.verify.nginx.config import Directive, NginxConfig, context_chain, parse

PASS_DIRECTIVES = ("proxy_pass", "grpc_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "memcached_pass")
# name -> default as nginx 1.22 has it (the text a user would write to get it).
DEFAULTS = {
    "proxy_buffering": "on", "proxy_http_version": "1.0", "proxy_read_timeout": "60s",
    "proxy_send_timeout": "60s", "proxy_connect_timeout": "60s", "proxy_ignore_client_abort": "off",
    "proxy_request_buffering": "on", "proxy_buffer_size": "4k", "proxy_buffers": "8 4k",
    "proxy_cache": "off", "proxy_ignore_headers": "", "chunked_transfer_encoding": "on",
    "gzip": "off", "gzip_types": "text/html", "gzip_proxied": "off", "limit_conn": "",
}
MAIN_DEFAULTS = {"worker_processes": "1", "worker_rlimit_nofile": ""}
EVENTS_DEFAULTS = {"worker_connections": "512"}
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}


def parse_time(text: str) -> float:
    """An nginx time ("60s", "1m30s", "500ms", "75") in seconds."""
    total, rest = 0.0, text.strip()
    if re.fullmatch(r"\d+", rest):
        return float(rest)
    for number, unit in re.findall(r"(\d+)(ms|[smhdwMy])", rest):
        total += int(number) * _UNITS[unit]
    if not re.fullmatch(r"(\d+(ms|[smhdwMy]))+", rest):
        raise ValueError(f"not an nginx time: {text!r}")
    return total


def read(path: Path) -> Reading:
    config = parse(path)
    server, location = select_route(config)
    chain = context_chain(location)
    reading = Reading(proxy="nginx", file=path, route=describe_route(server, location, path))
    for name, default in DEFAULTS.items():
        reading.settings[name] = _inherited(chain, name, default)
    reading.settings["proxy_set_header Connection"] = _connection_header(chain)
    main = config.main
    for name, default in MAIN_DEFAULTS.items():
        reading.settings[name] = _one(main, name, default)
    events = main.first("events")
    for name, default in EVENTS_DEFAULTS.items():
        reading.settings[name] = _one(events, name, default) if events else _default(name, default)
    upstream = upstream_block(config, location)
    if upstream is not None:
        keepalive = upstream.first("keepalive")
        reading.settings["keepalive"] = (
            Setting("keepalive", keepalive.args[0], keepalive.text(), _short(keepalive, path))
            if keepalive else _default("keepalive", ""))
    reading.settings = {k: _relative(v, path) for k, v in reading.settings.items()}
    if any(d.name == "if" for d in location.walk()):
        reading.notes.append("the location has `if` blocks; they are not evaluated (settings read outside them)")
    return reading


def select_route(config: NginxConfig) -> tuple[Directive, Directive]:
    """The server block and location that proxy the chat route.

    Several servers may match: one whose server-level `return` answers everything (the usual
    port-80 redirect) never proxies; a `default_server` wins over the others; then file order.
    """
    candidates: list[tuple[Directive, Directive]] = []
    for server in config.blocks("server"):
        if server.parent is None or server.parent.name != "http":
            continue  # stream {} and upstream {} also have `server`
        if server.first("return") is not None:
            continue
        location = match_location(server, ROUTE_PATH)
        if location is not None and any(location.first(p) for p in PASS_DIRECTIVES):
            candidates.append((server, location))
    if not candidates:
        raise UnusableInput(f"no server block proxies POST {ROUTE_PATH} (no location with proxy_pass "
                            "matches it)", file=config.main.file)
    for server, location in candidates:
        if any("default_server" in listen.args for listen in server.children("listen")):
            return server, location
    return candidates[0]


def match_location(block: Directive, uri: str) -> Directive | None:
    """nginx's location search: `=` exact, longest prefix (`^~` stops), then regexes in order."""
    locations = [d for d in block.children("location") if d.args and not d.args[0].startswith("@")]
    prefix: Directive | None = None
    prefix_len = -1
    for loc in locations:
        modifier, pattern = (loc.args[0], loc.args[1]) if len(loc.args) == 2 else ("", loc.args[0])
        if modifier == "=" and pattern == uri:
            return loc
        if modifier in ("", "^~") and uri.startswith(pattern) and len(pattern) > prefix_len:
            prefix, prefix_len = loc, len(pattern)
    if prefix is not None:
        nested = match_location(prefix, uri)
        if prefix.args[0] == "^~":
            return nested or prefix
        if nested is not None and nested is not prefix:
            return nested
    for loc in locations:
        if len(loc.args) == 2 and loc.args[0] in ("~", "~*"):
            flags = re.IGNORECASE if loc.args[0] == "~*" else 0
            if re.search(loc.args[1], uri, flags):
                return match_location(loc, uri) or loc
    return prefix


def upstream_block(config: NginxConfig, location: Directive) -> Directive | None:
    """The `upstream NAME {}` block the location's proxy_pass names, when it names one."""
    passing = next((location.first(p) for p in PASS_DIRECTIVES if location.first(p)), None)
    if passing is None or not passing.args:
        return None
    host = re.sub(r"^[a-z]+://", "", passing.args[0]).split("/", 1)[0]
    return next((u for u in config.blocks("upstream") if u.args and u.args[0] == host), None)


def describe_route(server: Directive, location: Directive, main: Path) -> str:
    names = next((s.args for s in server.children("server_name")), [])
    listen = " ".join(listen.args[0] for listen in server.children("listen")) or "80"
    shown = f"server {' '.join(names) or '(no server_name)'} listen {listen} ({_short(server, main)})"
    chain = [d for d in context_chain(location) if d.name == "location"]
    for loc in chain:
        shown += f" > location {' '.join(loc.args)} ({_short(loc, main)})"
    return shown


def _inherited(chain: list[Directive], name: str, default: str) -> Setting:
    for block in reversed(chain):
        found = block.first(name)
        if found is not None:
            return Setting(name, " ".join(found.args), found.text(), found.where)
    return _default(name, default)


def _connection_header(chain: list[Directive]) -> Setting:
    """proxy_set_header is inherited only from the nearest level that has any."""
    name = "proxy_set_header Connection"
    for block in reversed(chain):
        headers = block.children("proxy_set_header")
        if headers:
            for header in reversed(headers):
                if header.args and header.args[0].lower() == "connection":
                    value = header.args[1] if len(header.args) > 1 else ""
                    return Setting(name, value, f'proxy_set_header Connection "{value}"', header.where)
            # This level sets other headers only: Connection falls back to nginx's own "close".
            return Setting(name, "close", 'proxy_set_header Connection "close"', DEFAULT)
    return Setting(name, "close", 'proxy_set_header Connection "close"', DEFAULT)


def _one(block: Directive, name: str, default: str) -> Setting:
    found = block.first(name)
    if found is None:
        return _default(name, default)
    return Setting(name, " ".join(found.args), found.text(), found.where)


def _default(name: str, default: str) -> Setting:
    return Setting(name, default, f"{name} {default}".strip(), DEFAULT)


def _short(directive: Directive, main: Path) -> str:
    return f"{display_path(directive.file)}:{directive.line}"


def _relative(setting: Setting, main: Path) -> Setting:
    if setting.is_default:
        return setting
    file, _, line = setting.where.rpartition(":")
    return Setting(setting.name, setting.value, setting.text, f"{display_path(file)}:{line}")
