"""Which backend a VCL config sends verify's request to, by running its subs as Varnish would
(labs/verify/varnish/vcl.py): the backend `vcl_recv` (then `vcl_backend_fetch`) picks;
`req.backend_hint` unset: the first backend declared; a director (`import directors`,
`new d = directors.round_robin()` in vcl_init): its first member is judged, all are named.
A request `vcl_recv` answers itself (`synth`, `vcl`, `purge`) is not proxied.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from labs.findings import UnusableInput
from labs.verify.route import Request, Route
from labs.verify.varnish import vcl as run_vcl
from labs.verify.varnish.config import Backend, Token, Vcl

ANSWERED_HERE = ("synth", "vcl", "purge")  # vcl_recv's returns that proxy nothing


@dataclass
class Found:
    """What vcl_recv and vcl_backend_fetch did with one request: the backends it goes to."""

    env: dict[str, Any]  # the request as the subs see it (vcl_backend_response runs on it too)
    action: str  # what vcl_recv returns (no return: the built-in VCL passes a POST)
    recv: run_vcl.Outcome
    fetch: run_vcl.Outcome
    backends: list[Backend]  # a director's members, else the one backend
    picked_at: Token | None  # where the backend was set (None: the first declared)
    scope: str  # the branch that picked it

    @property
    def backend(self) -> Backend:
        return self.backends[0]


def proxied(vcl: Vcl) -> list[str]:
    return [f"backend {b.name} {address(b)} ({b.token.where()})" for b in vcl.backends.values()]


def match(vcl: Vcl, request: Request) -> Route | None:
    """The backend `request` reaches, unless vcl_recv answers it itself."""
    found = follow(vcl, request)
    if found is None:
        return None
    backend = found.backend
    # A backend the site's root reaches too serves every path (VCL's default branch): it is
    # chosen only when no branch is written for one of the API's paths.
    everywhere = follow(vcl, replace(request, path="/"))
    catch_all = everywhere is not None and [b.name for b in everywhere.backends] == [b.name for b in found.backends]
    return Route(f"{found.scope} > backend {backend.name} {address(backend)} ({backend.token.where()})",
                 found.scope if found.picked_at else f"backend {backend.name} ({backend.token.where()})",
                 found, host=request.host, catch_all=catch_all)


def follow(vcl: Vcl, request: Request) -> Found | None:
    env = run_vcl.env_for(request)
    recv = run_vcl.run(vcl, "vcl_recv", env)
    action = recv.action[0] if recv.action else "pass"
    if action in ANSWERED_HERE:
        return None
    fetch = run_vcl.Outcome() if action == "pipe" else run_vcl.run(vcl, "vcl_backend_fetch", env)
    backends, picked_at, scope = _backend(vcl, recv, fetch)
    return Found(env, action, recv, fetch, backends, picked_at, scope)


def address(backend: Backend) -> str:
    if backend.attr("path"):
        return backend.attr("path") or ""
    return f"{backend.attr('host')}:{backend.attr('port') or '80'}"


def _backend(vcl: Vcl, recv: run_vcl.Outcome, fetch: run_vcl.Outcome) -> tuple[list[Backend], Token | None, str]:
    """The backends the request goes to (a director's members), where that was set, its scope."""
    chosen = fetch.sets.get("bereq.backend") or recv.sets.get("req.backend_hint")
    if chosen is None:
        first = next(iter(vcl.backends.values()))
        return [first], None, "sub vcl_recv (no backend_hint: the first backend declared)"
    value, token, scope = chosen
    name = value[0].text if value else ""
    if name in vcl.backends:
        return [vcl.backends[name]], token, f"{scope} ({token.where()})"
    director = vcl.directors.get(name.rsplit(".", 1)[0])
    if director is not None:
        members = [vcl.backends[m] for m in director.members if m in vcl.backends]
        if members:
            return members, token, f"{scope} > directors.{director.kind} {director.name} ({token.where()})"
    raise UnusableInput(f"the backend set at {token.where()} ({run_vcl.text(value)}) is not one verify can "
                        "follow (a backend or a director built in vcl_init)", file=str(token.file), line=token.line)
