"""Which HAProxy frontend and backend serve one request, as HAProxy chooses them.

The frontends (and `listen` sections) with a `bind` in HTTP mode are tried in the config's order.
A `listen` with servers of its own serves the request itself; else the first `use_backend` whose
condition holds for the request picks the backend (labs/verify/haproxy/acl.py evaluates it: path,
method, Host and other header ACLs with their match methods, pattern files and maps beside the
config; a condition verify cannot tell is taken as true and noted), else `default_backend`. A
backend named by `%[...]` (a map) is looked up as HAProxy does, else the default_backend is judged
and said so. Which request is tried first, and the error when none is served, are the pipeline's
(labs/verify/route.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from labs.findings import UnusableInput
from labs.verify.haproxy import acl
from labs.verify.haproxy.acl import Evaluation
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement
from labs.verify.model import display_path
from labs.verify.route import Request, Route


@dataclass(frozen=True)
class Served:
    """The frontend and backend serving a request (the same section for a `listen` with servers),
    and the request as verify measures it: its Host the one a host ACL asks for, when --host
    named none."""

    frontend: Section
    backend: Section
    request: Request


def match(config: HaproxyConfig, request: Request) -> Route | None:
    """The route HAProxy sends `request` down, with what the evaluation noticed on the way."""
    judged = Evaluation(request, config.file.parent)
    found = _sections_for(config, judged)
    if found is None:
        return None
    frontend, backend = found
    shown = display_path(config.file)
    host = request.host or judged.host_needed
    return Route(describe=f"{frontend.kind} {frontend.name} ({shown}:{frontend.line})"
                          + (f" > backend {backend.name} ({shown}:{backend.line})" if backend is not frontend else ""),
                 scope=f"{backend.kind} {backend.name} ({shown}:{backend.line})",
                 handle=Served(frontend, backend, replace(request, host=host)), host=host, notes=judged.notes)


def proxied(config: HaproxyConfig) -> list[str]:
    """Every frontend's backends (use_backend rules, default_backend, a listen's own servers)."""
    shown = display_path(config.file)
    out = []
    for frontend in config.proxies("frontend", "listen"):
        for statement in [*frontend.find("use_backend"), *frontend.find("default_backend")]:
            out.append(f"{frontend.kind} {frontend.name} > {' '.join(statement.words)} ({shown}:{statement.line})")
        if frontend.kind == "listen" and frontend.find("server"):
            out.append(f"listen {frontend.name} ({shown}:{frontend.line}) -> its own servers")
    return out


def _sections_for(config: HaproxyConfig, judged: Evaluation) -> tuple[Section, Section] | None:
    for frontend in config.proxies("frontend", "listen"):
        if not frontend.find("bind"):
            continue
        mode = frontend.last("mode") or _defaults_mode(config, frontend)
        if mode is not None and _word(mode, 1, config) != "http":
            continue
        if frontend.kind == "listen" and frontend.find("server"):
            return frontend, frontend
        acls = acl.acls_of(frontend, config.file)
        default = frontend.last("default_backend")
        default_name = _word(default, 1, config) if default is not None else None
        for rule in frontend.find("use_backend"):
            name = _word(rule, 1, config)
            if not acl.condition(rule.words[2:], acls, judged):
                continue
            if "%[" in name:
                backend = _mapped(config, rule, name, default_name, judged)
                if backend is None:
                    continue
                return frontend, backend
            backend = config.named("backend", name)
            if backend is not None:
                return frontend, backend
        if default_name is not None and (backend := config.named("backend", default_name)) is not None:
            return frontend, backend
    return None


def _mapped(config: HaproxyConfig, rule: Statement, name: str, default_name: str | None,
            judged: Evaluation) -> Section | None:
    """The backend a `use_backend %[...]` names for the request, else the default_backend, said so."""
    evaluated = acl.log_format(name, judged)
    backend = config.named("backend", evaluated) if evaluated else None
    if backend is not None:
        judged.note(f"backend chosen: use_backend {name} gives {evaluated} for {judged.request.path}")
        return backend
    backend = config.named("backend", default_name) if default_name else None
    if backend is not None:
        judged.note(f"backend chosen: {'no' if evaluated is None else 'no backend named'} "
                    f"{evaluated or 'value'} from use_backend {name} ({display_path(config.file)}:{rule.line}), "
                    f"so the default_backend {default_name} is judged")
    return backend


def _word(statement: Statement, index: int, config: HaproxyConfig) -> str:
    if len(statement.words) <= index:
        raise UnusableInput(f"'{statement.keyword}' needs a value", file=display_path(config.file),
                            line=statement.line)
    return statement.words[index]


def _defaults_mode(config: HaproxyConfig, section: Section) -> Statement | None:
    defaults = config.defaults_for(section)
    return defaults.last("mode") if defaults else None
