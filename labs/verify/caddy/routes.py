"""Which Caddy route serves the chat request, by Caddy's own route semantics (apps.http.servers).

A server's `routes` run in order: a route whose `match` (any of its matcher sets, every matcher
in a set) matches the request runs its `handle` list; a route in a `group` runs only if no earlier
route of that group ran (the Caddyfile's `handle` blocks are one group); `terminal` ends the
chain after it. Middleware (`encode`, `headers`, `rewrite` ...) runs and hands on; a `subroute`
(`handle`, `handle_path`, `route`) runs its own routes the same way; the first responding handler
(`reverse_proxy`, `file_server`, `static_response`, `error`...) ends the request. `handle_path`'s
`rewrite` `strip_path_prefix` changes the path later matchers see.

Matchers read: `path` (Caddy's globs: exact, `/prefix*`, `*suffix`, `*sub*`, else path.Match),
`path_regexp`, `host` (exact or `*.` one label, case-insensitive), `method`, `header` and
`header_regexp` (the request verify sends, labs/verify/route.py: `Accept: text/event-stream`,
`Content-Type: application/json`, a Content-Length of a few hundred bytes, and what --header adds),
`not`.
Others (`remote_ip`, `query`, `expression`, ...) are taken as matching, and said.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from labs.verify.caddy.config import CaddyConfig
from labs.verify.route import Request, Route

RESPONDERS = {"reverse_proxy", "file_server", "static_response", "error", "acme_server", "copy_response",
              "metrics", "templates_terminal", "abort"}


@dataclass
class Found:
    """The handler that answers, the middleware before it, and the blocks it sits in."""

    server: str
    handler: dict[str, Any]
    chain: list[tuple[str, dict[str, Any]]]  # (kind, the route or handler) outermost first
    before: list[dict[str, Any]]  # middleware handlers that ran before it, in order
    hosts: list[str]  # the host matchers on the way (the Host header a request needs)
    unknown: list[str] = field(default_factory=list)  # matchers taken as matching
    site: int | None = None  # the line of its site block (Caddyfile) or server (JSON)
    proxy_line: int | None = None  # the line of its reverse_proxy


@dataclass
class _Seen:
    """The request as the routes see it on the way: `path` as the rewrites before left it."""

    request: Request
    path: str


def proxied(config: CaddyConfig) -> list[str]:
    """Every reverse_proxy of every server, described."""
    return [f"server {name}: {describe_handler(h)}" for name, server in config.servers.items()
            for h in _handlers(server.get("routes") or []) if h.get("handler") == "reverse_proxy"]


def match(config: CaddyConfig, request: Request) -> Route | None:
    """The reverse_proxy serving `request`: the first server whose routes end at one."""
    for name, server in config.servers.items():
        found = _walk(server.get("routes") or [], _Seen(request, request.path), Found(name, {}, [], [], []), set())
        if found is not None and found.handler.get("handler") == "reverse_proxy":
            return _route(config, found, request)
    return None


def _route(config: CaddyConfig, found: Found, request: Request) -> Route:
    found.site = site_line(config, found)
    found.proxy_line = _proxy_line(config, found)
    host = request.host or next((_concrete(h) for h in found.hosts), None)
    # A route no path matcher limits serves every path: chosen only when none is written for the API.
    catch_all = not any(_names_path(s) for kind, part in found.chain if kind == "route" for s in part.get("match") or [])
    return Route(describe(config, found), f"the reverse_proxy at {config.where(found.proxy_line)}", found,
                 host=host, catch_all=catch_all, unknown=sorted(set(found.unknown)))


def _names_path(matcher_set: dict[str, Any]) -> bool:
    return any(name in ("path", "path_regexp") or (name == "not" and any(_names_path(s) for s in value))
               for name, value in matcher_set.items())


def _walk(routes: list[dict[str, Any]], seen: _Seen, state: Found, groups: set[str]) -> Found | None:
    """None: the chain goes on past these routes; a Found: it ended (its handler, or {} when a
    terminal route ended it with nothing responding)."""
    for route in routes:
        sets = route.get("match")
        if sets and not any(_matches(s, seen, state) for s in sets):
            continue
        group = route.get("group")
        if group:
            if group in groups:
                continue
            groups.add(group)
        hosts = [h for s in sets or [] for h in s.get("host") or []]
        state.chain.append(("route", route))
        state.hosts.extend(hosts)
        for handler in route.get("handle") or []:
            kind = handler.get("handler")
            if kind == "subroute":
                state.chain.append(("subroute", handler))
                ended = _walk(handler.get("routes") or [], seen, state, groups)
                if ended is not None:
                    return ended
                state.chain.pop()
            elif kind in RESPONDERS:
                state.handler = handler
                return state
            else:
                if kind == "rewrite":
                    seen.path = _rewritten(handler, seen.path)
                state.before.append(handler)
        if route.get("terminal"):
            return state  # the chain ends here, nothing responded
        state.chain.pop()
        del state.hosts[len(state.hosts) - len(hosts):]
    return None


def _rewritten(handler: dict[str, Any], path: str) -> str:
    prefix = handler.get("strip_path_prefix")
    if prefix and path.lower().startswith(prefix.lower()):
        path = path[len(prefix):] or "/"
        return path if path.startswith("/") else "/" + path
    suffix = handler.get("strip_path_suffix")
    if suffix and path.endswith(suffix):
        return path[: -len(suffix)]
    uri = handler.get("uri")
    if uri and "{" not in uri:
        return uri.split("?")[0] or path
    return path


def _matches(matcher_set: dict[str, Any], seen: _Seen, state: Found) -> bool:
    for name, value in matcher_set.items():
        if name == "path":
            ok = any(path_matches(p, seen.path) for p in value)
        elif name == "path_regexp":
            ok = re.search(value.get("pattern", ""), seen.path) is not None
        elif name == "host":
            host = seen.request.host
            ok = host is None or any(host_matches(h, host) for h in value)
        elif name == "method":
            ok = seen.request.method.upper() in (m.upper() for m in value)
        elif name == "header":
            ok = all(_header_matches(seen.request.header(k), v) for k, v in value.items())
        elif name == "header_regexp":
            ok = all(_header_regexp_matches(seen.request.header(k), v) for k, v in value.items())
        elif name == "not":
            ok = not any(_matches(s, seen, state) for s in value)
        elif name == "protocol":
            ok = value in ("http", "http/1.1", "http/1")
        else:
            state.unknown.append(name)
            ok = True
        if not ok:
            return False
    return True


def path_matches(pattern: str, path: str) -> bool:
    """Caddy's path matcher (case-insensitive): exact, prefix*, *suffix, *substring*, else a glob."""
    pattern, path = pattern.lower(), path.lower()
    if "*" not in pattern:
        return pattern == path
    if pattern.startswith("*") and pattern.endswith("*") and pattern.count("*") == 2:
        return pattern[1:-1] in path
    if pattern.endswith("*") and pattern.count("*") == 1:
        return path.startswith(pattern[:-1])
    if pattern.startswith("*") and pattern.count("*") == 1:
        return path.endswith(pattern[1:])
    regex = "".join("[^/]*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, path) is not None


def host_matches(pattern: str, host: str) -> bool:
    pattern, host = pattern.lower(), host.lower().split(":")[0]
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and "." not in host[: -len(pattern) + 1]
    return fnmatch.fnmatchcase(host, pattern) if "*" in pattern else pattern == host


def _header_regexp_matches(sent: str | None, matcher: dict[str, Any]) -> bool:
    return sent is not None and re.search(matcher.get("pattern", ""), sent) is not None


def _header_matches(sent: str | None, values: list[str] | None) -> bool:
    if sent is None:
        return False
    if not values:
        return True
    return any(fnmatch.fnmatchcase(sent.lower(), v.lower()) for v in values)


def _handlers(routes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for route in routes:
        for handler in route.get("handle") or []:
            out.append(handler)
            if handler.get("handler") == "subroute":
                out.extend(_handlers(handler.get("routes") or []))
    return out


def describe_handler(handler: dict[str, Any]) -> str:
    dials = [u.get("dial", "?") for u in handler.get("upstreams") or []]
    return f"reverse_proxy {' '.join(dials) or '(dynamic upstreams)'}"


def describe_matcher(route: dict[str, Any]) -> str:
    parts = []
    for s in route.get("match") or []:
        for name, value in s.items():
            if isinstance(value, list):
                parts.append(f"{name} {' '.join(map(str, value))}")
            elif isinstance(value, dict) and name == "path_regexp":
                parts.append(f"path_regexp {value.get('pattern')}")
            else:
                parts.append(name)
    return ", ".join(parts)


def site_line(config: CaddyConfig, found: Found) -> int | None:
    server = config.servers[found.server]
    if config.caddyfile:
        return config.site_line(found.hosts, server.get("listen") or [])
    return config.line_of(found.server)


def _proxy_line(config: CaddyConfig, found: Found) -> int | None:
    """The reverse_proxy's line: its directive naming its first upstream's host (Caddyfile), its
    handler key (JSON); else the site's."""
    dial = _dial(found.handler)
    # Its whole address first: a site with two pools on one host (the fixed Caddyfile's MCP route,
    # 127.0.0.1:8001, above the chat route's :8000) has two reverse_proxy lines naming the host,
    # and the first of them is not the judged route's.
    line = config.line_of("reverse_proxy", found.site, contains=dial) if config.caddyfile and dial else None
    line = line or config.line_of("reverse_proxy" if config.caddyfile else "handler", found.site,
                                  contains=None if not config.caddyfile else _dial_host(found.handler))
    if line is None and not config.caddyfile:
        line = config.line_of("handler", found.site, contains="reverse_proxy")
    return line or found.site


def _dial(handler: dict[str, Any]) -> str | None:
    """The first upstream's address as the handler dials it (host:port)."""
    return next((u["dial"] for u in handler.get("upstreams") or [] if u.get("dial")), None)


def _dial_host(handler: dict[str, Any]) -> str | None:
    dial = _dial(handler)
    return dial.rsplit(":", 1)[0].strip("[]") if dial else None


def _concrete(host: str) -> str:
    return "verify." + host[2:] if host.startswith("*.") else host


def describe(config: CaddyConfig, found: Found) -> str:
    server = config.servers[found.server]
    shown = f"server {found.server} listen {' '.join(server.get('listen') or [])}"
    if found.site:
        shown += f" ({config.where(found.site)})"
    for kind, part in found.chain:
        matcher = describe_matcher(part) if kind == "route" else ""
        if matcher:
            shown += f" > {matcher}"
    return shown + f" > {describe_handler(found.handler)} ({config.where(found.proxy_line)})"
