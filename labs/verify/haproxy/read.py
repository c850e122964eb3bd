"""What is in effect on the HAProxy route the pipeline chose: the streaming settings of its frontend
and backend.

Settings come from the section itself, else its `defaults` section, else the defaults of the
HAProxy version the config is written for (labs/verify/haproxy/versions.py; default: the HAProxy
release that runs it). `option http-no-delay` counts on either side; `option abortonclose` needs
both (see `_abortonclose`); the counters that refuse a request past a limit are read by
labs/verify/haproxy/limits.py.
"""
from __future__ import annotations

import re
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.haproxy import limits, versions
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement, time_at
from labs.verify.haproxy.routes import Served
from labs.verify.model import DEFAULT, RouteWanted, Setting, display_path
from labs.verify.reader import InEffect
from proxies.binaries import find_binary

TIMEOUTS = ("server", "client", "tunnel", "connect")


def in_effect(config: HaproxyConfig, served: Served, wanted: RouteWanted) -> InEffect:
    """Every streaming setting in effect where `served` sends the request, with the defaults of
    the version asked for (`wanted.version`) or of the release that runs it (`wanted.series`)."""
    frontend, backend, path = served.frontend, served.backend, config.file
    shown = display_path(path)
    settings: dict[str, Setting] = {}

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
    settings["option http-no-delay"] = Setting(
        "option http-no-delay", state, f"{'' if state else 'no '}option http-no-delay",
        where(source) if source else DEFAULT)
    settings["option abortonclose"] = _abortonclose(config, frontend, backend, version, table, where)
    for name in TIMEOUTS:
        chain = fe_chain if name == "client" else be_chain
        found = lookup(chain, "timeout", name)
        settings[f"timeout {name}"] = (
            Setting(f"timeout {name}", time_at(found, path), " ".join(found.words), where(found))
            if found else Setting(f"timeout {name}", None, f"timeout {name} (none: no limit)", DEFAULT))
    for key in ("algo", "type"):
        found = lookup(be_chain, "compression", key) or lookup(fe_chain, "compression", key)
        default = "(none)" if key == "algo" else "(all types)"
        settings[f"compression {key}"] = (
            Setting(f"compression {key}", found.words[2:], " ".join(found.words), where(found))
            if found else Setting(f"compression {key}", None, f"compression {key} {default}", DEFAULT))
    glob = next((s for s in config.sections if s.kind == "global"), None)
    found = glob.last("maxconn") if glob else None
    settings["global maxconn"] = (
        Setting("global maxconn", _int_at(found, 1, path), " ".join(found.words), where(found)) if found
        else Setting("global maxconn", None, "maxconn (from the open-file limit)", DEFAULT))
    found = lookup(fe_chain, "maxconn")
    settings["frontend maxconn"] = (
        Setting("frontend maxconn", _int_at(found, 1, path), " ".join(found.words), where(found)) if found
        else Setting("frontend maxconn", None, "maxconn (the global maxconn)", DEFAULT))
    servers = [(_int_at(s, s.words.index("maxconn") + 1, path) * _count(s, path), s)
               for s in backend.find("server") + backend.find("server-template") if "maxconn" in s.words[2:]]
    total = sum(limit for limit, _ in servers)
    settings["server maxconn"] = (
        Setting("server maxconn", total, " ".join(servers[0][1].words), where(servers[0][1])) if servers
        else Setting("server maxconn", None, "maxconn (none per server: no limit)", DEFAULT))
    refusing = limits.limits(config, list({id(s): s for s in (frontend, backend)}.values()), served.request)
    if refusing:  # the lowest refuses first
        limit, statement = refusing[0]
        settings["counter limit"] = Setting("counter limit", limit, f"{' '.join(statement.words)} ({limit})",
                                            where(statement))
    else:
        settings["counter limit"] = Setting("counter limit", None, "no rule refuses past a counter", DEFAULT)
    return InEffect(settings, [said], versions.shown(version))


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
