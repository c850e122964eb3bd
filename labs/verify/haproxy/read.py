"""Which HAProxy frontend and backend serve the chat route (`POST /v1/chat/completions`), and what is in effect.

A frontend (or `listen`) picks its backend with the first `use_backend` whose condition holds,
else `default_backend`; conditions are evaluated for the chat request (path and method ACLs;
a condition on anything else, such as the Host header, is taken as true and noted). Settings come
from the section itself, else its `defaults` section, else HAProxy 2.6's own defaults.
"""
from __future__ import annotations

import re
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement, parse
from labs.verify.model import DEFAULT, ROUTE_METHOD, Reading, RouteWanted, Setting, display_path

OPTIONS = ("http-no-delay", "abortonclose")
TIMEOUTS = ("server", "client", "tunnel", "connect")
_UNITS = {"us": 1e-6, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str) -> float:
    """An HAProxy time ("30s", "1m", "500", in ms when bare) in seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(us|ms|s|m|h|d)?", text.strip())
    if match is None:
        raise ValueError(f"not an HAProxy time: {text!r}")
    return float(match[1]) * _UNITS[match[2] or "ms"]


def read(path: Path, wanted: RouteWanted = RouteWanted()) -> Reading:
    config = parse(path)
    frontend, backend, notes, route_path = select_route(config, wanted)
    shown = display_path(path)
    reading = Reading(proxy="haproxy", file=path, notes=notes, path=route_path,
                      host=wanted.host or host_from_notes(notes), route=(
        f"{frontend.kind} {frontend.name} ({shown}:{frontend.line})"
        + (f" > backend {backend.name} ({shown}:{backend.line})" if backend is not frontend else "")),
                      why=f"asked for with --path {wanted.path}" if wanted.path else
                      f"the first of the API's usual paths it sends to a backend: POST {route_path}")

    def where(statement: Statement) -> str:
        return f"{shown}:{statement.line}"

    def lookup(sections: list[Section | None], *words: str) -> Statement | None:
        for section in sections:
            if section is not None:
                found = section.last(*words)
                if found is not None:
                    return found
        return None

    fe_chain = [frontend, config.defaults_for(frontend)]
    be_chain = [backend, config.defaults_for(backend)]
    for option in OPTIONS:
        # Either side may enable it; the nearer `no option` wins within one side.
        state, source = False, None
        for chain in ((fe_chain, be_chain) if option == "http-no-delay" else (be_chain,)):
            enabled, statement = _option(chain, option)
            if enabled:
                state, source = True, statement
            elif statement is not None and source is None:
                source = statement
        text = f"{'' if state else 'no '}option {option}"
        reading.settings[f"option {option}"] = Setting(f"option {option}", state, text,
                                                       where(source) if source else DEFAULT)
    for name in TIMEOUTS:
        chain = fe_chain if name == "client" else be_chain
        found = lookup(chain, "timeout", name)
        reading.settings[f"timeout {name}"] = (
            Setting(f"timeout {name}", _time_at(found, path), " ".join(found.words), where(found))
            if found else Setting(f"timeout {name}", None, f"timeout {name} (none: no limit)", DEFAULT))
    for key in ("algo", "type"):
        found = lookup(be_chain, "compression", key) or lookup(fe_chain, "compression", key)
        default = "(none)" if key == "algo" else "(all types)"
        reading.settings[f"compression {key}"] = (
            Setting(f"compression {key}", found.words[2:], " ".join(found.words), where(found))
            if found else Setting(f"compression {key}", None, f"compression {key} {default}", DEFAULT))
    glob = next((s for s in config.sections if s.kind == "global"), None)
    found = glob.last("maxconn") if glob else None
    reading.settings["global maxconn"] = (
        Setting("global maxconn", int(found.words[1]), " ".join(found.words), where(found)) if found
        else Setting("global maxconn", None, "maxconn (from the open-file limit)", DEFAULT))
    found = lookup(fe_chain, "maxconn")
    reading.settings["frontend maxconn"] = (
        Setting("frontend maxconn", int(found.words[1]), " ".join(found.words), where(found)) if found
        else Setting("frontend maxconn", None, "maxconn (the global maxconn)", DEFAULT))
    limits = [(int(s.words[s.words.index("maxconn") + 1]), s) for s in backend.find("server")
              if "maxconn" in s.words[:-1]]
    if limits:
        total = sum(limit for limit, _ in limits)
        reading.settings["server maxconn"] = Setting("server maxconn", total, " ".join(limits[0][1].words),
                                                     where(limits[0][1]))
    return reading


def _time_at(statement: Statement, path: Path) -> float:
    try:
        return parse_time(statement.words[2] if len(statement.words) > 2 else "")
    except ValueError as exc:
        raise UnusableInput(str(exc), file=display_path(path), line=statement.line) from None


def host_from_notes(notes: list[str]) -> str | None:
    """The Host a host ACL on the chat route asks for (noted while the ACLs were evaluated)."""
    for note in notes:
        match = re.match(r"the route needs Host '([^']+)'", note)
        if match:
            return match[1]
    return None


def _option(chain: list[Section | None], option: str) -> tuple[bool, Statement | None]:
    for section in chain:
        if section is None:
            continue
        for statement in reversed(section.statements):
            words = statement.words
            if words[:2] == ["option", option]:
                return True, statement
            if words[:3] == ["no", "option", option]:
                return False, statement
    return False, None


def select_route(config: HaproxyConfig, wanted: RouteWanted = RouteWanted()
                 ) -> tuple[Section, Section, list[str], str]:
    """The frontend and backend that serve the first of `wanted.paths` some frontend routes."""
    for route_path in wanted.paths:
        found = _route_for(config, route_path)
        if found is not None:
            return (*found, route_path)
    raise UnusableInput(f"no HTTP frontend sends POST {' or '.join(wanted.paths)} to a backend (bind + "
                        "use_backend or default_backend)", file=str(config.file))


def _route_for(config: HaproxyConfig, route_path: str) -> tuple[Section, Section, list[str]] | None:
    notes: list[str] = []
    for frontend in config.proxies("frontend", "listen"):
        if not frontend.find("bind"):
            continue
        mode = frontend.last("mode") or _defaults_mode(config, frontend)
        if mode is not None and mode.words[1] != "http":
            continue
        if frontend.kind == "listen" and frontend.find("server"):
            return frontend, frontend, notes
        acls = _acls(frontend)
        for rule in frontend.find("use_backend"):
            if _condition_holds(rule.words[2:], acls, notes, route_path):
                backend = config.named("backend", rule.words[1])
                if backend is not None:
                    return frontend, backend, notes
        default = frontend.last("default_backend")
        if default is not None and (backend := config.named("backend", default.words[1])) is not None:
            return frontend, backend, notes
    return None


def _defaults_mode(config: HaproxyConfig, section: Section) -> Statement | None:
    defaults = config.defaults_for(section)
    return defaults.last("mode") if defaults else None


def _acls(section: Section) -> dict[str, list[list[str]]]:
    acls: dict[str, list[list[str]]] = {}
    for statement in section.find("acl"):
        acls.setdefault(statement.words[1], []).append(statement.words[2:])
    return acls


def _condition_holds(words: list[str], acls: dict[str, list[list[str]]], notes: list[str],
                     route_path: str) -> bool:
    if not words:
        return True
    negate_all = words[0] == "unless"
    terms = words[1:] if words[0] in ("if", "unless") else words
    result, current, index = False, True, 0
    while index < len(terms):
        term = terms[index]
        if term in ("||", "or"):
            result, current = result or current, True
        elif term == "{":
            end = terms.index("}", index)
            current = current and _criterion(terms[index + 1:end], notes, route_path)
            index = end
        else:
            negate = term.startswith("!")
            name = term.lstrip("!")
            holds = (any(_criterion(c, notes, route_path) for c in acls.get(name, [])) if name in acls
                     else _builtin(name, notes))
            current = current and (holds != negate)
        index += 1
    result = result or current
    return result != negate_all


def _builtin(name: str, notes: list[str]) -> bool:
    builtins = {"TRUE": True, "FALSE": False, "METH_POST": True, "HTTP": True, "METH_GET": False,
                "HTTP_1.1": True}
    if name not in builtins:
        notes.append(f"condition {name!r} is not known to verify; taken as true")
    return builtins.get(name, True)


def _criterion(words: list[str], notes: list[str], route_path: str) -> bool:
    fetch, values = words[0], [w for w in words[1:] if not w.startswith("-")]
    insensitive = "-i" in words
    path = route_path.lower() if insensitive else route_path
    values = [v.lower() for v in values] if insensitive else values
    tests = {
        "path_beg": lambda v: path.startswith(v), "path": lambda v: path == v,
        "path_end": lambda v: path.endswith(v), "path_sub": lambda v: v in path,
        "path_dir": lambda v: v.strip("/") in path.split("/"),
        "path_reg": lambda v: re.search(v, path) is not None,
        "method": lambda v: v.upper() == ROUTE_METHOD,
    }
    if fetch in tests:
        return any(tests[fetch](v) for v in values)
    if re.fullmatch(r"(req\.)?hdr(_beg|_dom|_end)?\(host\)", fetch, re.I) and values:
        # The chat route is reached with the Host the rule names: verify's requests carry it.
        notes.append(f"the route needs Host {values[0]!r} ({fetch}): verify's requests carry it")
        return True
    notes.append(f"ACL on {fetch} is not evaluated; taken as true (the chat route is assumed to match)")
    return True
