"""Which nginx server and location serve a request, found as nginx finds them.

Server: among the servers of the http block, by `server_name` against the Host as nginx's
ngx_http_find_virtual_server does (exact name, then the longest `*.` wildcard, then the longest
`.*` wildcard, then the first regex in order), else the default server (`default_server`, else the
first). Location: ngx_http_core_find_location: an `=` exact match ends the search; otherwise the
longest prefix is remembered and its nested locations searched the same way; unless it is `^~`,
the regexes of the level are then tried in order, the first that matches wins (and its nested
locations are searched); else the longest prefix (or the nested prefix inside it) serves.

Without --path, verify looks for the route of an OpenAI-style API: the usual API paths in order
(model.API_PATHS), preferring a location written for them over a catch-all `location /`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from labs.findings import UnusableInput
from labs.verify import regex as foreign
from labs.verify.model import RouteWanted
from labs.verify.nginx.config import Directive, NginxConfig
from labs.verify.nginx.targets import PASS_DIRECTIVES

CATCH_ALL = ("/",)


@dataclass
class RouteChoice:
    server: Directive
    location: Directive
    path: str
    host: str | None  # the Host the request carries (the one asked for, else the server's name)
    why: str
    routes: list[str] = field(default_factory=list)  # every proxied location, for the output


def select_route(config: NginxConfig, wanted: RouteWanted = RouteWanted()) -> RouteChoice:
    servers = [s for s in config.blocks("server") if s.parent is not None and s.parent.name == "http"]
    routes = [describe(server, location) for server in servers for location in proxied_locations(server)]
    if not routes:
        raise UnusableInput("no server block proxies anything (no location with proxy_pass)",
                            file=config.shown(config.entry))
    pool = [s for s in servers if not _redirects_everything(s)]
    chosen_servers = _by_host(pool, wanted.host) if wanted.host else _usual_order(pool)
    for accept_catch_all in (False, True):
        for path in wanted.paths:
            for server in chosen_servers:
                location = _served_by(server, match_location(server, path))
                if location is None or not _proxies(location):
                    continue
                if not accept_catch_all and not wanted.path and _is_catch_all(location):
                    continue
                host = wanted.host or _name_of(server)
                why = (f"asked for with --path {wanted.path}" if wanted.path else
                       f"it proxies POST {path}" + (", the first of the API's usual paths a location is "
                                                    "written for" if not _is_catch_all(location) else
                                                    " (a catch-all location: no location is written for "
                                                    "the API's usual paths)"))
                if wanted.host:
                    why += f"; server chosen by server_name for Host {wanted.host}"
                return RouteChoice(server, location, path, host, why, routes)
    asked = " or ".join(wanted.paths)
    raise UnusableInput(f"no location proxies POST {asked}" + (f" for Host {wanted.host}" if wanted.host else "")
                        + "; the proxied routes are: " + "; ".join(routes) + " (choose one with --path"
                        + (" and --host" if len(servers) > 1 else "") + ")", file=config.shown(config.entry))


def proxied_locations(block: Directive) -> list[Directive]:
    out = []
    for location in block.children("location"):
        if _proxies(location):
            out.append(location)
        out.extend(proxied_locations(location))
    return out


def describe(server: Directive, location: Directive) -> str:
    names = " ".join(next((s.args for s in server.children("server_name")), [])) or "(no server_name)"
    chain, node = [], location
    while node is not None and node.name == "location":
        chain.append(f"location {' '.join(node.args)} ({node.where})")
        node = node.parent
    target = next((f"{p} {location.first(p).args[0]}" for p in PASS_DIRECTIVES
                   if location.first(p) is not None and location.first(p).args), "")
    return f"server {names} ({server.where}) > " + " > ".join(reversed(chain)) + (f" -> {target}" if target else "")


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
    node = nested
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
