"""Which Traefik router serves the chat request, as Traefik picks it: every router whose rule
matches, the highest priority first (a router's `priority`, else the length of its rule).

Rules are Traefik 3's expressions: matchers (`Host`, `HostRegexp`, `Path`, `PathPrefix`,
`PathRegexp`, `Method`, `Header`, `HeaderRegexp`, `Query`, `QueryRegexp`, `ClientIP`) joined by
`&&`, `||`, `!` and parentheses. A Host matcher, when no --host is given, is taken as the Host to
send (and said); a matcher on what verify cannot know (headers not passed with --header, the
query, the client's address) is taken as true and said.

A Host written as an environment placeholder (``Host(`${OLLAMA_HOSTNAME:-localhost}`)``) matches no
request: the file provider does not expand `${...}` (it renders Go templates only, `{{ env "NAME" }}`:
https://doc.traefik.io/traefik/v3.7/reference/install-configuration/providers/others/file/), so the
rule asks for that literal Host, which Go's server refuses with 400 (measured on Traefik 3.7.15 run
with OLLAMA_HOSTNAME=ollama.example: neither Host `ollama.example` nor `localhost`, the default,
reached a router by that alternative (404 off the prefixes), the literal got 400). The route is then chosen by the rest of the rule, and said.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from labs.findings import UnusableInput
from labs.verify.model import RouteWanted
from labs.verify.traefik.config import Item, TraefikConfig, entry_point_names, get

_TOKEN = re.compile(r"\s*(?:(&&|\|\||!|\(|\)|,)|`([^`]*)`|\"((?:[^\"\\]|\\.)*)\"|(\w+))")
REDIRECTS = ("redirectscheme", "redirectregex")


@dataclass
class Match:
    router: Item
    priority: int
    host: str | None  # the Host its rule asks for, when verify had to choose one
    notes: list[str] = field(default_factory=list)


@dataclass
class _Request:
    method: str
    path: str
    host: str | None
    headers: dict[str, str]
    needs_host: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    unexpanded: list[str] = field(default_factory=list)  # Host matchers written as ${...} placeholders


def tokens(rule: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(rule):
        if rule[at:].strip() == "":
            break
        found = _TOKEN.match(rule, at)
        if found is None:
            raise ValueError(f"cannot read the rule at {rule[at:at + 20]!r}")
        operator, backtick, quoted, word = found.groups()
        out.append(("op", operator) if operator else ("str", backtick) if backtick is not None
                   else ("str", quoted) if quoted is not None else ("word", word))
        at = found.end()
    return out


class _Parser:
    def __init__(self, rule: str, request: _Request) -> None:
        self.items, self.at, self.request = tokens(rule), 0, request

    def peek(self) -> tuple[str, str] | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        item = self.peek()
        if item is None or (value is not None and item[1] != value):
            raise ValueError(f"expected {value or 'more'} in the rule")
        self.at += 1
        return item

    def parse(self) -> bool:
        result = self.any_of()
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()[1]!r} in the rule")
        return result

    def any_of(self) -> bool:
        result = self.all_of()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.all_of()
            result = result or right
        return result

    def all_of(self) -> bool:
        result = self.one()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.one()
            result = result and right
        return result

    def one(self) -> bool:
        item = self.take()
        if item == ("op", "!"):
            return not self.one()
        if item == ("op", "("):
            result = self.any_of()
            self.take(")")
            return result
        if item[0] != "word":
            raise ValueError(f"expected a matcher, not {item[1]!r}")
        self.take("(")
        args: list[str] = []
        while self.peek() != ("op", ")"):
            kind, value = self.take()
            if kind != "str":
                raise ValueError(f"{item[1]}(...) takes quoted values")
            args.append(value)
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        return _matches(item[1], args, self.request)


def _matches(matcher: str, args: list[str], request: _Request) -> bool:
    name = matcher.lower()
    if not args:
        raise ValueError(f"{matcher}() needs a value")
    if name in ("host", "hostheader", "hostregexp") and any("${" in a for a in args):
        request.unexpanded.append(f"{matcher}(`{'`, `'.join(args)}`)")
        return False
    if name in ("host", "hostheader"):
        if request.host is None:
            request.needs_host.append(args[0])
            return True
        return request.host.lower() in (a.lower() for a in args)
    if name == "hostregexp":
        if request.host is None:
            request.needs_host.append(args[0])
            return True
        return re.search(args[0], request.host) is not None
    if name == "path":
        return request.path in args
    if name == "pathprefix":
        return any(request.path.startswith(a) for a in args)
    if name == "pathregexp":
        return re.search(args[0], request.path) is not None
    if name == "method":
        return request.method.upper() in (a.upper() for a in args)
    if name in ("header", "headerregexp"):
        value = request.headers.get(args[0].lower())
        if value is None:
            request.assumed.append(f"{matcher}(`{'`, `'.join(args)}`)")
            return True
        return (value == args[1]) if name == "header" and len(args) > 1 else \
            re.search(args[1], value) is not None if len(args) > 1 else True
    if name in ("query", "queryregexp", "clientip"):
        request.assumed.append(f"{matcher}(`{'`, `'.join(args)}`)")
        return True
    raise ValueError(f"unknown matcher {matcher}")


def rule_matches(rule: str, method: str, path: str, host: str | None,
                 headers: dict[str, str] | None = None) -> tuple[bool, _Request]:
    request = _Request(method, path, host, {k.lower(): v for k, v in (headers or {}).items()})
    return _Parser(rule, request).parse(), request


def priority(router: Item) -> int:
    explicit = get(router.body, "priority")
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    return len(str(get(router.body, "rule") or ""))


def select_route(config: TraefikConfig, wanted: RouteWanted) -> tuple[Match, str]:
    """The router that serves the first of `wanted.paths` a router sends to a service."""
    headers = dict(wanted.headers)
    for route_path in wanted.paths:
        found = _route_for(config, route_path, wanted.host, headers)
        if found is not None:
            return found, route_path
    shown = ", ".join(f"{name} ({get(item.body, 'rule')})" for name, item in config.section("routers").items())
    unexpanded = any("${" in str(get(item.body, "rule") or "") for item in config.section("routers").values())
    raise UnusableInput(f"no router serves POST {' or '.join(wanted.paths)} with a service; routers: {shown}"
                        + (f" (each {unexpanded_note('Host(`${...}`)')})" if unexpanded else ""), file=str(config.file))


def unexpanded_note(matchers: str) -> str:
    """Why a Host written as `${...}` matches nothing (the module's docstring has the measurement)."""
    return (f"{matchers} is read as written: Traefik's file provider does not expand "
            "${...} (it renders Go templates only, {{ env \"NAME\" }}), so no request's Host matches it (Go's "
            "server answers 400 to that literal Host); render the file before Traefik reads it if the "
            "variable was meant")


def _route_for(config: TraefikConfig, path: str, host: str | None, headers: dict[str, str]) -> Match | None:
    candidates: list[Match] = []
    for router in config.section("routers").values():
        rule = get(router.body, "rule")
        if not rule:
            continue
        try:
            ok, request = rule_matches(str(rule), "POST", path, host, headers)
        except (ValueError, re.error) as exc:
            raise UnusableInput(f"router {router.name}: {exc}", file=router.where("rule").rsplit(":", 1)[0],
                                line=_line(router)) from None
        if not ok:
            continue
        notes = [f"the route's rule assumes {', '.join(request.assumed)} holds (verify cannot tell)"] \
            if request.assumed else []
        if request.unexpanded:
            notes.append(f"router {router.name}'s {unexpanded_note(', '.join(dict.fromkeys(request.unexpanded)))}; "
                         "the router was chosen by the rest of its rule")
        chosen_host = request.needs_host[0] if request.needs_host and not re.search(r"[\\^$*+?(\[]",
                                                                                     request.needs_host[0]) else None
        if request.needs_host and chosen_host is None:
            notes.append(f"the route needs a Host matching {request.needs_host[0]!r}: pass one with --host")
        candidates.append(Match(router, priority(router), chosen_host, notes))
    for match in sorted(candidates, key=lambda m: -m.priority):
        if _redirects(config, match.router):
            continue
        if get(match.router.body, "service"):
            return match
    return None


def _redirects(config: TraefikConfig, router: Item) -> bool:
    for name in get(router.body, "middlewares") or []:
        middleware = config.find("middlewares", str(name))
        if middleware is not None and any(str(k).lower() in REDIRECTS for k in middleware.body):
            return True
    return False


def _line(router: Item) -> int | None:
    where = router.where("rule")
    tail = where.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def all_routes(config: TraefikConfig) -> list[str]:
    return [f"router {name}: {get(item.body, 'rule')} -> {get(item.body, 'service')}"
            for name, item in config.section("routers").items()]


def entry_points(config: TraefikConfig, router: Item) -> list[str]:
    """The entry points a router listens on: its own list, else every entry point (Traefik's
    default, less those marked `asDefault: false` when some are marked)."""
    named = entry_point_names(router.body)
    points: dict[str, Any] = get(config.static, "entryPoints") or {}
    if named:
        return [n for n in named if n in points]
    defaults = [name for name, body in points.items() if get(body, "asDefault") is True]
    return defaults or list(points)
