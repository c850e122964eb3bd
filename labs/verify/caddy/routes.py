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
`header_regexp` (the request verify sends: `Accept: text/event-stream`, `Content-Type:
application/json`, a Content-Length of a few hundred bytes), `not`.
Others (`remote_ip`, `query`, `expression`, ...) are taken as matching, and said.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from labs.findings import UnusableInput
from labs.verify.caddy.config import CaddyConfig
from labs.verify.model import REQUEST_HEADERS, ROUTE_METHOD, RouteWanted

RESPONDERS = {"reverse_proxy", "file_server", "static_response", "error", "acme_server", "copy_response",
              "metrics", "templates_terminal", "abort"}


@dataclass
class Request:
    path: str
    host: str | None
    method: str = ROUTE_METHOD


@dataclass
class Found:
    """The handler that answers, the middleware before it, and the blocks it sits in."""

    server: str
    handler: dict[str, Any]
    chain: list[tuple[str, dict[str, Any]]]  # (kind, the route or handler) outermost first
    before: list[dict[str, Any]]  # middleware handlers that ran before it, in order
    hosts: list[str]  # the host matchers on the way (the Host header a request needs)
    unknown: list[str] = field(default_factory=list)  # matchers taken as matching


def select_route(config: CaddyConfig, wanted: RouteWanted = RouteWanted()) -> tuple[Found, str, str]:
    """The route serving POST on the first of `wanted.paths` any server proxies: (found, path, why)."""
    servers = config.servers
    proxied = [f"{name}: {describe_handler(h)}" for name, server in servers.items()
               for h in _handlers(server.get("routes") or []) if h.get("handler") == "reverse_proxy"]
    if not proxied:
        raise UnusableInput("no server proxies anything (no reverse_proxy)", file=str(config.file))
    for path in wanted.paths:
        for name, server in servers.items():
            found = walk(server.get("routes") or [], Request(path, wanted.host), name)
            if found is not None and found.handler.get("handler") == "reverse_proxy":
                why = (f"asked for with --path {wanted.path}" if wanted.path else
                       f"it proxies POST {path}, the first of the API's usual paths a route serves")
                if wanted.host:
                    why += f"; host matchers judged for Host {wanted.host}"
                return found, path, why
    asked = " or ".join(wanted.paths)
    raise UnusableInput(f"no route proxies POST {asked}" + (f" for Host {wanted.host}" if wanted.host else "")
                        + "; the proxied routes are: " + "; ".join(proxied) + " (choose one with --path"
                        + (" and --host" if len(servers) > 1 else "") + ")", file=str(config.file))


def walk(routes: list[dict[str, Any]], request: Request, server: str) -> Found | None:
    found = _walk(routes, request, Found(server, {}, [], [], []), set())
    return found if found is not None and found.handler else None


def _walk(routes: list[dict[str, Any]], request: Request, state: Found, groups: set[str]) -> Found | None:
    """None: the chain goes on past these routes; a Found: it ended (its handler, or {} when a
    terminal route ended it with nothing responding)."""
    for route in routes:
        sets = route.get("match")
        if sets and not any(_matches(s, request, state) for s in sets):
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
                ended = _walk(handler.get("routes") or [], request, state, groups)
                if ended is not None:
                    return ended
                state.chain.pop()
            elif kind in RESPONDERS:
                state.handler = handler
                return state
            else:
                if kind == "rewrite":
                    request.path = _rewritten(handler, request.path)
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


def _matches(matcher_set: dict[str, Any], request: Request, state: Found) -> bool:
    for name, value in matcher_set.items():
        if name == "path":
            ok = any(path_matches(p, request.path) for p in value)
        elif name == "path_regexp":
            ok = re.search(value.get("pattern", ""), request.path) is not None
        elif name == "host":
            ok = request.host is None or any(host_matches(h, request.host) for h in value)
        elif name == "method":
            ok = request.method.upper() in (m.upper() for m in value)
        elif name == "header":
            ok = all(_header_matches(k, v) for k, v in value.items())
        elif name == "header_regexp":
            ok = all(_header_regexp_matches(k, v) for k, v in value.items())
        elif name == "not":
            ok = not any(_matches(s, request, state) for s in value)
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


def _header_regexp_matches(name: str, matcher: dict[str, Any]) -> bool:
    sent = REQUEST_HEADERS.get(name.lower())
    return sent is not None and re.search(matcher.get("pattern", ""), sent) is not None


def _header_matches(name: str, values: list[str] | None) -> bool:
    sent = REQUEST_HEADERS.get(name.lower())
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
