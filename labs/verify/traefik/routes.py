"""Which Traefik router serves the chat request, as Traefik picks it: every router whose rule
matches, the highest priority first (a router's `priority`, else the length of its rule).

Rules are Traefik 3's expressions: matchers (`Host`, `HostRegexp`, `Path`, `PathPrefix`,
`PathRegexp`, `Method`, `Header`, `HeaderRegexp`, `Query`, `QueryRegexp`, `ClientIP`) joined by
`&&`, `||`, `!` and parentheses, evaluated for one request (labs/verify/route.py `Request`: the
headers verify's measured requests carry, --header's among them). A Host matcher, when no --host
is given, is taken as the Host to send (and said); a matcher on what verify cannot know (a header
the request does not carry, the query, the client's address) is taken as true and said.

A Host written as an environment placeholder (``Host(`${OLLAMA_HOSTNAME:-localhost}`)``) matches no
request: the file provider does not expand `${...}` (it renders Go templates only, `{{ env "NAME" }}`:
https://doc.traefik.io/traefik/v3.7/reference/install-configuration/providers/others/file/), so the
rule asks for that literal Host, which Go's server refuses with 400 (measured on Traefik 3.7.15 run
with OLLAMA_HOSTNAME=ollama.example: neither Host `ollama.example` nor `localhost`, the default,
reached a router by that alternative (404 off the prefixes), the literal got 400). The route is then chosen by the rest of the rule, and said.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from labs.findings import UnusableInput
from labs.verify.route import Request, Route
from labs.verify.traefik.config import Item, TraefikConfig, entry_point_names, get

_TOKEN = re.compile(r"\s*(?:(&&|\|\||!|\(|\)|,)|`([^`]*)`|\"((?:[^\"\\]|\\.)*)\"|(\w+))")
REDIRECTS = ("redirectscheme", "redirectregex")
# A path no API serves: a rule that also matches it serves every path (a catch-all router).
ANY_PATH = "/streamlab-any-path"


@dataclass
class Evaluation:
    """One rule evaluated for one request, and what it had to assume on the way."""

    request: Request
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
    def __init__(self, rule: str, evaluation: Evaluation) -> None:
        self.items, self.at, self.evaluation = tokens(rule), 0, evaluation

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
        left = self.peek()
        if left is not None:
            raise ValueError(f"unexpected {left[1]!r} in the rule")
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
        return _matches(item[1], args, self.evaluation)


def _matches(matcher: str, args: list[str], seen: Evaluation) -> bool:
    name, request = matcher.lower(), seen.request
    if not args:
        raise ValueError(f"{matcher}() needs a value")
    if name in ("host", "hostheader", "hostregexp") and any("${" in a for a in args):
        seen.unexpanded.append(f"{matcher}(`{'`, `'.join(args)}`)")
        return False
    if name in ("host", "hostheader"):
        if request.host is None:
            seen.needs_host.append(args[0])
            return True
        return request.host.lower() in (a.lower() for a in args)
    if name == "hostregexp":
        if request.host is None:
            seen.needs_host.append(args[0])
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
        value = request.header(args[0])
        if value is None:
            seen.assumed.append(f"{matcher}(`{'`, `'.join(args)}`)")
            return True
        return (value == args[1]) if name == "header" and len(args) > 1 else \
            re.search(args[1], value) is not None if len(args) > 1 else True
    if name in ("query", "queryregexp", "clientip"):
        seen.assumed.append(f"{matcher}(`{'`, `'.join(args)}`)")
        return True
    raise ValueError(f"unknown matcher {matcher}")


def rule_matches(rule: str, request: Request) -> tuple[bool, Evaluation]:
    evaluation = Evaluation(request)
    return _Parser(rule, evaluation).parse(), evaluation


def priority(router: Item) -> int:
    explicit = get(router.body, "priority")
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    return len(str(get(router.body, "rule") or ""))


def unexpanded_note(matchers: str) -> str:
    """Why a Host written as `${...}` matches nothing (the module's docstring has the measurement)."""
    return (f"{matchers} is read as written: Traefik's file provider does not expand "
            "${...} (it renders Go templates only, {{ env \"NAME\" }}), so no request's Host matches it (Go's "
            "server answers 400 to that literal Host); render the file before Traefik reads it if the "
            "variable was meant")


def match(config: TraefikConfig, request: Request) -> Route | None:
    """The router Traefik serves the request with: the highest priority of those whose rule
    matches, unless it redirects or names no service (then none serves it here)."""
    candidates: list[tuple[Item, Evaluation]] = []
    for router in config.section("routers").values():
        rule = get(router.body, "rule")
        if not rule:
            continue
        ok, seen = _evaluated(router, str(rule), request)
        if ok:
            candidates.append((router, seen))
    for router, seen in sorted(candidates, key=lambda found: -priority(found[0])):
        if _redirects(config, router):
            continue
        if get(router.body, "service"):
            return _route(config, router, seen)
    return None


def _evaluated(router: Item, rule: str, request: Request) -> tuple[bool, Evaluation]:
    try:
        return rule_matches(rule, request)
    except (ValueError, re.error) as exc:
        raise UnusableInput(f"router {router.name}: {exc}", file=router.where("rule").rsplit(":", 1)[0],
                            line=_line(router)) from None


def _route(config: TraefikConfig, router: Item, seen: Evaluation) -> Route:
    notes = []
    if seen.unexpanded:
        notes.append(f"router {router.name}'s {unexpanded_note(', '.join(dict.fromkeys(seen.unexpanded)))}; "
                     "the router was chosen by the rest of its rule")
    host = seen.needs_host[0] if seen.needs_host and not re.search(r"[\\^$*+?(\[]", seen.needs_host[0]) else None
    if seen.needs_host and host is None:
        notes.append(f"the route needs a Host matching {seen.needs_host[0]!r}: pass one with --host")
    if host is not None:
        notes.append(f"the route needs Host {host!r}: measured with it")
    service_name = get(router.body, "service")
    service = config.find("services", str(service_name))
    anywhere, _ = _evaluated(router, str(get(router.body, "rule")), replace(seen.request, path=ANY_PATH))
    return Route(describe=f"router {router.name} ({router.where('rule')}: {get(router.body, 'rule')})"
                          f" > service {service_name}" + (f" ({service.where()})" if service else " (another provider's)"),
                 scope=f"router {router.name} ({router.where()})", handle=router,
                 host=seen.request.host or host, catch_all=anywhere, unknown=list(dict.fromkeys(seen.assumed)),
                 notes=notes)


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
    """Every router, for the output; a Host written as ${...} is said, as no request matches it."""
    out = []
    for name, item in config.section("routers").items():
        rule = str(get(item.body, "rule"))
        said = f" ({unexpanded_note('Host(`${...}`)')})" if "${" in rule else ""
        out.append(f"router {name}: {rule} -> {get(item.body, 'service')}{said}")
    return out


def entry_points(config: TraefikConfig, router: Item) -> list[str]:
    """The entry points a router listens on: its own list, else every entry point (Traefik's
    default, less those marked `asDefault: false` when some are marked)."""
    named = entry_point_names(router.body)
    points: dict[str, Any] = get(config.static, "entryPoints") or {}
    if named:
        return [n for n in named if n in points]
    defaults = [name for name, body in points.items() if get(body, "asDefault") is True]
    return defaults or list(points)
