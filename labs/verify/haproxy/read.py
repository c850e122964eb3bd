"""Which HAProxy frontend and backend serve the chat route (`POST /v1/chat/completions`), and what is in effect.

A frontend (or `listen`) picks its backend with the first `use_backend` whose condition holds,
else `default_backend`; conditions are evaluated for the chat request by labs.verify.haproxy.acl
(path, method and Host ACLs with their match methods, pattern files and maps beside the config; a
condition verify cannot tell is taken as true and noted). A backend named by `%[...]` (a map) is
looked up as HAProxy does, else the default_backend is judged and said so. Settings come
from the section itself, else its `defaults` section, else the defaults of the HAProxy version the
config is written for (labs/verify/haproxy/versions.py; default: the HAProxy here).
"""
from __future__ import annotations

import re
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.haproxy import acl, limits, versions
from labs.verify.haproxy.acl import Request
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement, parse
from labs.verify.model import DEFAULT, Reading, RouteWanted, Setting, display_path
from proxies.binaries import find_binary

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
    check_timeouts(config)
    frontend, backend, notes, route_path = select_route(config, wanted)
    shown = display_path(path)
    reading = Reading(proxy="haproxy", file=path, notes=notes, path=route_path,
                      host=wanted.host or host_from_notes(notes), route=(
        f"{frontend.kind} {frontend.name} ({shown}:{frontend.line})"
        + (f" > backend {backend.name} ({shown}:{backend.line})" if backend is not frontend else "")),
                      why=f"asked for with --path {wanted.path}" if wanted.path else
                      f"the first of the API's usual paths it sends to a backend: POST {route_path}")
    reading.routes = _proxied_routes(config, shown)
    reading.scope = f"{backend.kind} {backend.name} ({shown}:{backend.line})"
    chosen = [n.removeprefix("backend chosen: ") for n in notes if n.startswith("backend chosen: ")]
    if chosen:
        reading.why += "; " + "; ".join(chosen)

    def where(statement: Statement) -> str:
        return f"{shown}:{statement.line}"

    def lookup(sections: list[Section | None], *words: str) -> Statement | None:
        for section in sections:
            if section is not None:
                found = section.last(*words)
                if found is not None:
                    return found
        return None

    version, said = versions.TABLE.chosen(wanted.version, find_binary("haproxy", wanted.series))
    reading.version = versions.shown(version)
    reading.notes.append(said)
    table = versions.TABLE.defaults(version)
    fe_chain = [frontend, config.defaults_for(frontend)]
    be_chain = [backend, config.defaults_for(backend)]
    # Either side may enable it; the nearer `no option` wins within one side.
    state, source = table["option http-no-delay"] == "on", None
    for chain in (fe_chain, be_chain):
        enabled, statement = _option(chain, "http-no-delay")
        if enabled:
            state, source = True, statement
        elif statement is not None and source is None:
            state, source = False, statement
    reading.settings["option http-no-delay"] = Setting(
        "option http-no-delay", state, f"{'' if state else 'no '}option http-no-delay",
        where(source) if source else DEFAULT)
    reading.settings["option abortonclose"] = _abortonclose(config, frontend, backend, version, table, where)
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
        Setting("global maxconn", _int_at(found, 1, path), " ".join(found.words), where(found)) if found
        else Setting("global maxconn", None, "maxconn (from the open-file limit)", DEFAULT))
    found = lookup(fe_chain, "maxconn")
    reading.settings["frontend maxconn"] = (
        Setting("frontend maxconn", _int_at(found, 1, path), " ".join(found.words), where(found)) if found
        else Setting("frontend maxconn", None, "maxconn (the global maxconn)", DEFAULT))
    servers = [(_int_at(s, s.words.index("maxconn") + 1, path) * _count(s, path), s)
               for s in backend.find("server") + backend.find("server-template") if "maxconn" in s.words[2:]]
    if servers:
        total = sum(limit for limit, _ in servers)
        reading.settings["server maxconn"] = Setting("server maxconn", total, " ".join(servers[0][1].words),
                                                     where(servers[0][1]))
    refusing = limits.limits(config, list({id(s): s for s in (frontend, backend)}.values()), route_path,
                             reading.host)
    if refusing:  # the lowest refuses first
        limit, statement = refusing[0]
        reading.settings["counter limit"] = Setting("counter limit", limit, f"{' '.join(statement.words)} "
                                                    f"({limit})", where(statement))
    return reading


def _int_at(statement: Statement, index: int, path: Path) -> int:
    """The integer at `index` of a statement (`maxconn 100`), else UnusableInput naming the line."""
    text = statement.words[index] if index < len(statement.words) else ""
    if not re.fullmatch(r"\d+", text):
        raise UnusableInput(f"{statement.words[index - 1]} needs a whole number, not {text or 'nothing'!r}",
                            file=display_path(path), line=statement.line)
    return int(text)


def _count(statement: Statement, path: Path) -> int:
    """How many servers a line makes: one, or a server-template's NUM (or LOW-HIGH)."""
    if statement.keyword != "server-template":
        return 1
    text = statement.words[2] if len(statement.words) > 2 else ""
    found = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if found is None:
        raise UnusableInput(f"server-template needs a number of servers (NUM or LOW-HIGH), not {text!r}",
                            file=display_path(path), line=statement.line)
    return int(found[1]) if found[2] is None else max(0, int(found[2]) - int(found[1]) + 1)


def check_timeouts(config: HaproxyConfig) -> None:
    """Every `timeout NAME VALUE` of the config reads as a time (else UnusableInput at its line)."""
    for section in config.sections:
        for statement in section.find("timeout"):
            if len(statement.words) < 2:
                raise UnusableInput("timeout needs a name and a time (timeout server 30s)",
                                    file=display_path(config.file), line=statement.line)
            _time_at(statement, config.file)


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


def _abortonclose(config: HaproxyConfig, frontend: Section, backend: Section, version: versions.Version,
                  table: dict[str, str], where) -> Setting:
    """Whether a client's departure reaches the server. HAProxy 2.6 needs abortonclose on both
    sides, the backend's and the frontend's (measured on 2.6.12: in the backend alone the server
    noticed 2.1 s late, as with none; in the defaults both inherit, at once); 3.2 needs the
    backend's alone (measured on 3.2.26: 0.00 s; versions.BACKEND_ALONE). Before 3.3 a frontend
    ignores its own `option abortonclose` (2.6 warns "no backend capability", 3.2 refuses it), so
    it gets it only from its defaults section; from 3.3 a frontend may say it, and HTTP proxies
    have it on by default."""
    default = table["option abortonclose"] == "on"
    own_counts = frontend.kind == "listen" or version >= (3, 3)
    sides = []
    for section, counts in ((backend, True), (frontend, own_counts)):
        chain = [section if counts else None, config.defaults_for(section)]
        enabled, statement = _option(chain, "abortonclose")
        sides.append((enabled if statement is not None else default, statement, section))
    (be_on, be_at, _), (fe_on, fe_at, _) = sides
    # the backend's alone, where the frontend side says nothing either way (what was measured)
    if be_on and (fe_on or (version >= versions.BACKEND_ALONE and fe_at is None)):
        source = be_at or fe_at
        text = "option abortonclose" + ("" if source else f" (HAProxy {versions.shown(version)}'s default "
                                                          "in HTTP proxies)")
        return Setting("option abortonclose", True, text, where(source) if source else DEFAULT)
    ignored = frontend.last("option", "abortonclose") if not own_counts else None
    unheard = f" (frontend {frontend.name}'s own line {ignored.line} is ignored before 3.3)" if ignored else ""
    if not be_on:
        return Setting("option abortonclose", False, "no option abortonclose" + (
            "" if be_at else f" (HAProxy {versions.shown(version)}'s default)") + unheard,
            where(be_at) if be_at else DEFAULT)
    return Setting("option abortonclose", False, (
        f"option abortonclose in backend {backend.name} only: frontend {frontend.name} needs it too, and "
        f"before 3.3 it takes it only from its defaults section{unheard}"),
        where(fe_at) if fe_at else where(be_at) if be_at else DEFAULT)


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
        found = _route_for(config, route_path, wanted.host)
        if found is not None:
            return (*found, route_path)
    raise UnusableInput(f"no HTTP frontend sends POST {' or '.join(wanted.paths)} to a backend (bind + "
                        "use_backend or default_backend)", file=str(config.file))


def _route_for(config: HaproxyConfig, route_path: str, host: str | None = None
               ) -> tuple[Section, Section, list[str]] | None:
    request = Request(route_path, host, config.file.parent)
    for frontend in config.proxies("frontend", "listen"):
        if not frontend.find("bind"):
            continue
        mode = frontend.last("mode") or _defaults_mode(config, frontend)
        if mode is not None and _word(mode, 1, config) != "http":
            continue
        if frontend.kind == "listen" and frontend.find("server"):
            return frontend, frontend, request.notes
        acls = acl.acls_of(frontend, config.file)
        default = frontend.last("default_backend")
        default_name = _word(default, 1, config) if default is not None else None
        for rule in frontend.find("use_backend"):
            name = _word(rule, 1, config)
            if not acl.condition(rule.words[2:], acls, request):
                continue
            if "%[" in name:
                evaluated = acl.log_format(name, request)
                backend = config.named("backend", evaluated) if evaluated else None
                if backend is None:
                    backend = config.named("backend", default_name) if default_name else None
                    if backend is None:
                        continue
                    request.note(f"backend chosen: {'no' if evaluated is None else 'no backend named'} "
                                 f"{evaluated or 'value'} from use_backend {name} "
                                 f"({display_path(config.file)}:{rule.line}), so the default_backend "
                                 f"{default_name} is judged")
                else:
                    request.note(f"backend chosen: use_backend {name} gives {evaluated} for {route_path}")
                return frontend, backend, request.notes
            backend = config.named("backend", name)
            if backend is not None:
                return frontend, backend, request.notes
        if default_name is not None and (backend := config.named("backend", default_name)) is not None:
            return frontend, backend, request.notes
    return None


def _proxied_routes(config: HaproxyConfig, shown: str) -> list[str]:
    """Every frontend's backends (use_backend rules, default_backend, a listen's own servers)."""
    out = []
    for frontend in config.proxies("frontend", "listen"):
        for statement in [*frontend.find("use_backend"), *frontend.find("default_backend")]:
            out.append(f"{frontend.kind} {frontend.name} > {' '.join(statement.words)} ({shown}:{statement.line})")
        if frontend.kind == "listen" and frontend.find("server"):
            out.append(f"listen {frontend.name} ({shown}:{frontend.line}) -> its own servers")
    return out


def _word(statement: Statement, index: int, config: HaproxyConfig) -> str:
    if len(statement.words) <= index:
        raise UnusableInput(f"'{statement.keyword}' needs a value", file=display_path(config.file),
                            line=statement.line)
    return statement.words[index]


def _defaults_mode(config: HaproxyConfig, section: Section) -> Statement | None:
    defaults = config.defaults_for(section)
    return defaults.last("mode") if defaults else None
