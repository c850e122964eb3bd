"""Which VirtualHost and which proxy rule serve the chat route, chosen as httpd 2.4 chooses.

VirtualHost: by `--host` against `ServerName`/`ServerAlias` (wildcards `*`, `?`), else the first
one (the default of its address); no VirtualHost: the main server. The rule, for a path:
1. the VirtualHost's own `RewriteRule ... [P]` (mod_rewrite translates before mod_proxy; with
   `RewriteEngine On`; `RewriteCond`s taken as holding, said in a note);
2. a `ProxyPass` inside `<Location>`/`<LocationMatch>` (the sections merge in config order, the
   main server's first: the last matching one that has a ProxyPass wins);
3. the server's `ProxyPass`/`ProxyPassMatch` (the main server's, then the VirtualHost's, inherited
   so), checked in config order: the first that matches wins, `!` excludes the path.
https://httpd.apache.org/docs/2.4/mod/mod_proxy.html#proxypass (Ordering ProxyPass Directives)
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from labs.verify.apache.config import ApacheConfig, Directive
from labs.verify.route import Request, Route

PROXY_SCHEMES = ("http://", "https://", "ws://", "wss://", "h2c://", "h2://", "balancer://", "unix:", "fcgi://",
                 "ajp://", "uwsgi://", "scgi://")


@dataclass
class Rule:
    kind: str  # "ProxyPass", "ProxyPassMatch", "RewriteRule", "Location"
    directive: Directive  # the ProxyPass / RewriteRule line
    target: str
    keys: dict[str, str] = field(default_factory=dict)
    location: Directive | None = None

    def describe(self) -> str:
        shown = self.directive.text()
        if self.location is not None:
            shown = f"{self.location.text()} ({self.location.where}) > {shown}"
        return f"{shown} ({self.directive.where})"


@dataclass
class Served:
    """The server and rule that serve the chosen request: the route's handle for settings and rewrite."""

    vhost: Directive | None  # None: the main server
    rule: Rule
    locations: list[Directive]  # the <Location>s that apply to the path, in merge order


def names(vhost: Directive) -> list[str]:
    found = []
    server_name = vhost.last("servername")
    if server_name is not None and server_name.args:
        found.append(re.sub(r"^\w+://|:\d+$", "", server_name.args[0]).lower())
    for alias in vhost.children("serveralias"):
        found += [a.lower() for a in alias.args]
    return found


def location_matches(section: Directive, path: str) -> bool:
    args = section.args
    if section.key == "locationmatch" or (args and args[0] == "~"):
        pattern = args[-1] if args else ""
        return _search(pattern, path)
    prefix = args[0] if args else "/"
    if "*" in prefix or "?" in prefix:
        return fnmatch.fnmatchcase(path, prefix + "*")
    return _collapse(path).startswith(_collapse(prefix))


def locations(config: ApacheConfig, vhost: Directive | None, path: str) -> list[Directive]:
    levels = [config.main] + ([vhost] if vhost is not None else [])
    return [s for level in levels for s in level.children()
            if s.key in ("location", "locationmatch") and s.block is not None and location_matches(s, path)]


def proxy_rule(config: ApacheConfig, vhost: Directive | None, path: str) -> Rule | None:
    """The rule that proxies `path` in this server, or None (not proxied there)."""
    server = vhost if vhost is not None else config.main
    rewrite = _rewrite_rule(server, path)
    if rewrite is not None:
        return rewrite
    for section in reversed(locations(config, vhost, path)):
        passing = section.last("proxypass")
        if passing is not None and passing.args:
            if passing.args[0] == "!":
                return None
            return Rule("Location", passing, passing.args[0], _keys(passing.args[1:]), section)
    levels = [config.main] + ([vhost] if vhost is not None else [])
    for level in levels:
        for d in level.children():
            if d.key not in ("proxypass", "proxypassmatch") or len(d.args) < 2:
                continue
            if d.key == "proxypass" and d.args[0] == "~":  # ProxyPass ~ regex: ProxyPassMatch
                matched = len(d.args) > 2 and _search(d.args[1], path)
                args = d.args[2:]
            elif d.key == "proxypassmatch":
                matched, args = _search(d.args[0], path), d.args[1:]
            else:
                matched, args = _collapse(path).startswith(_collapse(d.args[0])), d.args[1:]
            if matched:
                return None if args[0] == "!" else Rule(d.name, d, args[0], _keys(args[1:]))
    return None


def match(config: ApacheConfig, request: Request) -> Route | None:
    """The VirtualHost the Host names (else the first, the default of its address; without a Host,
    the first that proxies the path) and the rule that proxies the path in it."""
    vhosts = config.vhosts()
    servers: list[Directive | None] = list(vhosts) or [None]
    notes = []
    if request.host:
        host = request.host.lower()
        named = [v for v in vhosts if any(fnmatch.fnmatchcase(host, n) for n in names(v))]
        servers = named or servers[:1]
        if not named and vhosts:
            notes.append(f"Host {request.host} names no VirtualHost: the first one (the default) serves it")
    for vhost in servers:
        rule = proxy_rule(config, vhost, request.path)
        if rule is None:
            continue
        served = Served(vhost, rule, locations(config, vhost, request.path))
        return Route(describe(served), scope(rule), served, host=request.host or _host_needed(vhost, vhosts),
                     notes=notes)
    return None


def scope(rule: Rule) -> str:
    """Where a fix for the chosen route goes: its <Location>, else the ProxyPass line itself."""
    if rule.location is not None:
        return f"{rule.location.text()} ({rule.location.where})"
    return f"the {rule.directive.name} at {rule.directive.where}"


def vhost_port(vhost: Directive | None) -> str | None:
    """The port a VirtualHost is addressed on (`*:80`, `[::]:443`), None for any (`*`, `_default_`)."""
    for addr in (vhost.args if vhost is not None else []):
        found = re.search(r":(\d+|\*)$", addr)
        if found and found[1] != "*":
            return found[1]
    return None


def describe(served: Served) -> str:
    if served.vhost is None:
        return f"main server > {served.rule.describe()}"
    shown = " ".join(names(served.vhost)[:1]) or "(no ServerName)"
    return f"{served.vhost.text()} {shown} ({served.vhost.where}) > {served.rule.describe()}"


def _host_needed(vhost: Directive | None, vhosts: list[Directive]) -> str | None:
    """The Host that reaches a VirtualHost which is not the first (default) one for its port."""
    if vhost is None:
        return None
    same_port = [v for v in vhosts if vhost_port(v) == vhost_port(vhost)]
    if same_port and same_port[0] is vhost:
        return None
    return (names(vhost) or [None])[0]


def every_route(config: ApacheConfig) -> list[str]:
    """Every proxying rule, of every VirtualHost (or the main server)."""
    servers: list[Directive | None] = list(config.vhosts()) or [None]
    shown = []
    for vhost in servers:
        prefix = f"{vhost.text()} ({vhost.where})" if vhost is not None else "main server"
        level = vhost if vhost is not None else config.main
        for d in level.walk():
            if d.key in ("proxypass", "proxypassmatch") and d.args and "!" not in d.args[:2] or (
                    d.key == "rewriterule" and _proxy_flag(d)):
                shown.append(f"{prefix} > {d.text()} ({d.where})")
    return shown


def _rewrite_rule(server: Directive, path: str) -> Rule | None:
    engine = server.last("rewriteengine")
    if engine is None or not engine.args or engine.args[0].lower() != "on":
        return None
    for d in server.children("rewriterule"):
        if len(d.args) < 2:
            continue
        pattern, negate = d.args[0].removeprefix("!"), d.args[0].startswith("!")
        if _search(pattern, path) == negate:
            continue
        flags = _flags(d)
        if "p" in flags or "proxy" in flags:
            return Rule("RewriteRule", d, _substituted(d.args[1], pattern, path))
        if "l" in flags or "last" in flags or "end" in flags or "f" in flags or any(f.startswith("r") for f in flags):
            return None
    return None


def _proxy_flag(d: Directive) -> bool:
    return len(d.args) >= 3 and bool({"p", "proxy"} & set(_flags(d)))


def _flags(d: Directive) -> list[str]:
    raw = d.args[2].strip("[]") if len(d.args) > 2 else ""
    return [f.strip().lower().split("=")[0] for f in raw.split(",") if f.strip()]


def _substituted(target: str, pattern: str, path: str) -> str:
    found = _compile(pattern).search(path)
    if found is None:
        return target
    return re.sub(r"\$(\d)", lambda m: (found.group(int(m[1])) or "") if int(m[1]) <= found.re.groups else "",
                  target)


def _keys(args: list[str]) -> dict[str, str]:
    return {a.split("=", 1)[0].lower(): a.split("=", 1)[1] for a in args if "=" in a}


def _collapse(path: str) -> str:
    return re.sub(r"/+", "/", path)


def _compile(pattern: str) -> re.Pattern[str]:
    flags = 0
    if pattern.startswith("(?i)"):
        flags, pattern = re.I, pattern[4:]
    try:
        return re.compile(pattern, flags)
    except re.error:
        return re.compile(r"(?!x)x")  # a PCRE-only pattern: taken as not matching


def _search(pattern: str, path: str) -> bool:
    return _compile(pattern).search(path) is not None
