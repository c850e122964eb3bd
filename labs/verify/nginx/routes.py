"""Which nginx server and location serve a request, found as nginx finds them.

Server: among the servers of the http block, by `server_name` against the Host as nginx's
ngx_http_find_virtual_server does (exact name, then the longest `*.` wildcard, then the longest
`.*` wildcard, then the first regex in order), else the default server (`default_server`, else the
first). Location: ngx_http_core_find_location: an `=` exact match ends the search; otherwise the
longest prefix is remembered and its nested locations searched the same way; unless it is `^~`,
the regexes of the level are then tried in order, the first that matches wins (and its nested
locations are searched); else the longest prefix (or the nested prefix inside it) serves.

The paths tried, their order and the error when none is served are the pipeline's
(labs/verify/route.py `choose`); this module answers one request at a time.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from labs.verify import regex as foreign
from labs.verify.nginx.config import Directive, NginxConfig, context_chain
from labs.verify.nginx.targets import PASS_DIRECTIVES
from labs.verify.route import Request, Route

CATCH_ALL = ("/",)


class Served(NamedTuple):
    """The server and the location that serve the judged request (a `route.Route`'s handle)."""

    server: Directive
    location: Directive


def proxied(config: NginxConfig) -> list[str]:
    """Every proxied location of every server, described for the output."""
    return [describe(server, location) for server in _servers(config) for location in proxied_locations(server)]


def match(config: NginxConfig, request: Request) -> Route | None:
    """The location that serves `request`, if it proxies it. With a Host, the one server nginx
    picks for it; without one, verify looks across the servers (a default_server first, then the
    file's order), preferring a location written for the path over a catch-all `location /`, and
    measures with the chosen server's name as the Host. nginx's location search looks at the URI
    only: no header reaches it (an `if ($http_x_...)` inside a location is not evaluated, said in
    the reading's notes)."""
    host = request.header("host")
    pool = [s for s in _servers(config) if not _redirects_everything(s)]
    servers = _by_host(pool, host) if host else _usual_order(pool)
    found = [Served(server, location) for server in servers
             for location in [_served_by(server, match_location(server, request.path))]
             if location is not None and _proxies(location)]
    if not found:
        return None
    served = next((s for s in found if not _is_catch_all(s.location)), found[0])
    server, location = served
    return Route(describe_route(server, location), f"location {' '.join(location.args)} ({location.where})",
                 served, host=host or _name_of(server), catch_all=_is_catch_all(location))


def describe_route(server: Directive, location: Directive) -> str:
    """The judged route as the output shows it: the server with its listens, each location down
    to the one that serves."""
    names = next((s.args for s in server.children("server_name")), [])
    listen = " ".join(listen.args[0] for listen in server.children("listen") if listen.args) or "80"
    shown = f"server {' '.join(names) or '(no server_name)'} listen {listen} ({server.where})"
    chain = [d for d in context_chain(location) if d.name == "location"]
    for loc in chain:
        shown += f" > location {' '.join(loc.args)} ({loc.where})"
    return shown


def _servers(config: NginxConfig) -> list[Directive]:
    return [s for s in config.blocks("server") if s.parent is not None and s.parent.name == "http"]


def proxied_locations(block: Directive) -> list[Directive]:
    out = []
    for location in block.children("location"):
        if _proxies(location):
            out.append(location)
        out.extend(proxied_locations(location))
    return out


def describe(server: Directive, location: Directive) -> str:
    names = " ".join(next((s.args for s in server.children("server_name")), [])) or "(no server_name)"
    chain = [f"location {' '.join(d.args)} ({d.where})" for d in context_chain(location) if d.name == "location"]
    passing = [d for d in map(location.first, PASS_DIRECTIVES) if d is not None and d.args]
    target = f"{passing[0].name} {passing[0].args[0]}" if passing else ""
    return f"server {names} ({server.where}) > " + " > ".join(chain) + (f" -> {target}" if target else "")


def match_location(block: Directive, uri: str) -> Directive | None:
    """ngx_http_core_find_location on the locations of `block` (a server or a location)."""
    statics, regexes = [], []
    for loc in block.children("location"):
        modifier, pattern = _modifier(loc)
        if modifier in ("~", "~*"):
            regexes.append((loc, pattern, modifier == "~*"))
        elif modifier != "@":
            statics.append((loc, modifier, pattern))
    best: Directive | None = None
    best_len, noregex = -1, False
    for loc, modifier, pattern in statics:
        if modifier == "=":
            if pattern == uri:
                return loc
            continue
        if uri.startswith(pattern) and len(pattern) > best_len:
            best, best_len, noregex = loc, len(pattern), modifier == "^~"
    found = best
    if best is not None:
        nested = match_location(best, uri)
        if nested is not None and (nested is not best) and _found_by_exact_or_regex(best, nested, uri):
            return nested  # an exact or regex match inside ends the search
        found = nested or best
        if noregex:
            return found
    for loc, pattern, insensitive in regexes:
        if _regex_matches(pattern, uri, insensitive):
            return match_location(loc, uri) or loc
    return found


def _found_by_exact_or_regex(parent: Directive, nested: Directive, uri: str) -> bool:
    """Whether the nested search ended with a definite match (nginx's NGX_OK), not just a prefix."""
    node: Directive | None = nested
    while node is not None and node is not parent:
        modifier, _ = _modifier(node)
        if modifier in ("=", "~", "~*"):  # a nested ^~ does not stop the outer regexes
            return True
        node = node.parent
    return False


def _modifier(loc: Directive) -> tuple[str, str]:
    args = loc.args
    if len(args) >= 2:
        return args[0], args[1]
    if not args:
        return "", ""
    for modifier in ("^~", "~*", "~", "=", "@"):  # written without a space: `location ~^/api`
        if args[0].startswith(modifier) and len(args[0]) > len(modifier):
            return modifier, args[0][len(modifier):] if modifier != "@" else args[0]
    return "", args[0]


def _regex_matches(pattern: str, uri: str, insensitive: bool) -> bool:
    """PCRE as Python reads it (labs/verify/regex.py); unreadable: not matching (read notes it)."""
    return foreign.search(pattern, uri, insensitive)


def regex_unreadable(config: NginxConfig) -> list[str]:
    """The location regexes Python cannot evaluate (they are taken as not matching)."""
    out = []
    for loc in config.blocks("location"):
        modifier, pattern = _modifier(loc)
        if modifier in ("~", "~*") and foreign.compiled(pattern) is None:
            out.append(f"location {modifier} {pattern} ({loc.where}): a regex Python cannot read")
    return out


def _served_by(server: Directive, location: Directive | None) -> Directive | None:
    """The location that answers: a `try_files ... @name` that finds no file (a POST to the API
    is no file) hands the request to the named location; variables in the name are empty for a
    plain POST (`@$http_upgrade` is `@`)."""
    if location is None or _proxies(location):
        return location
    tries = location.first("try_files") or server.first("try_files")
    if tries is None or not tries.args or not tries.args[-1].startswith("@"):
        return location
    name = re.sub(r"\$\{?\w+\}?", "", tries.args[-1])
    return next((loc for loc in server.children("location") if loc.args[:1] == [name]), location)


def _proxies(location: Directive) -> bool:
    return any(location.first(p) is not None for p in PASS_DIRECTIVES)


def _is_catch_all(location: Directive) -> bool:
    return _modifier(location)[1] in CATCH_ALL and location.parent is not None and location.parent.name == "server"


def _redirects_everything(server: Directive) -> bool:
    """A server-level `return` answers every request (the usual port-80 redirect): it proxies nothing."""
    return server.first("return") is not None


def _usual_order(servers: list[Directive]) -> list[Directive]:
    """Without --host: a default_server first, then the file's order."""
    default = [s for s in servers if any("default_server" in l.args or "default" in l.args
                                         for l in s.children("listen"))]
    return default + [s for s in servers if s not in default]


def _by_host(servers: list[Directive], host: str) -> list[Directive]:
    """The server nginx picks for Host `host` (ngx_http_find_virtual_server), then the default."""
    host = host.lower().rstrip(".")
    exact, head, tail, regex = [], [], [], []
    for server in servers:
        for name in (n.lower() for d in server.children("server_name") for n in d.args):
            if name.startswith("~"):
                if foreign.search(name[1:], host):
                    regex.append(server)
            elif name == host:
                exact.append(server)
            elif name.startswith("*.") and host.endswith(name[1:]):
                head.append((len(name), server))
            elif name.startswith(".") and (host == name[1:] or host.endswith(name)):
                head.append((len(name), server))
            elif name.endswith(".*") and host.startswith(name[:-1]):
                tail.append((len(name), server))
    ordered = exact + [s for _, s in sorted(head, key=lambda x: -x[0])] + \
        [s for _, s in sorted(tail, key=lambda x: -x[0])] + regex
    # Only the server nginx picks: a route of another server is not what this Host reaches.
    return ordered[:1] or _usual_order(servers)[:1]


def _name_of(server: Directive) -> str | None:
    """The first plain server_name (what a client names to reach this server), if any."""
    for d in server.children("server_name"):
        for name in d.args:
            if name and name not in ("_", "localhost", '""') and not name.startswith(("~", "*", ".")) \
                    and not name.endswith("*") and "$" not in name:
                return name
    return None
