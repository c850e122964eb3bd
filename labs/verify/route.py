"""The request a config's matchers see, the route a reader finds for it, and the one search.

One `Request` is built from --path/--host/--header for each path tried, the same for every proxy:
its headers are the ones verify's measured requests carry (model.REQUEST_HEADERS), the Host, and
what --header adds, so a header matcher (an Envoy route's `headers`, an HAProxy `hdr()` ACL, a
Caddy `header` matcher, a VCL `req.http.X` test) sees what the proxy will see when verify measures.

A reader's `match` says which of its routes serves one request, with its own semantics (nginx's
location search, HAProxy's `use_backend` order, Caddy's route groups, VCL run as written);
`choose` owns the order the requests are tried in, the preference for a route written for the API
over a catch-all one, and the one error text when nothing serves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol

from labs.findings import UnusableInput
from labs.verify.model import REQUEST_HEADERS, ROUTE_METHOD, RouteWanted, display_path


class NoRoute(UnusableInput):
    """No route of the config serves the request asked for (exit status 2)."""


@dataclass(frozen=True)
class Request:
    """What the judged request carries. `headers`: lower-case names; never printed (--header
    values are credentials)."""

    path: str
    host: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    method: str = ROUTE_METHOD

    def header(self, name: str) -> str | None:
        """A header as the proxy receives it (`host` is the Host, when one is sent)."""
        name = name.lower()
        if name == "host":
            return self.host
        return self.headers.get(name)


def requests(wanted: RouteWanted) -> Iterator[Request]:
    """The requests to try, in order: one per path (the one asked for, else the API's usual ones)."""
    headers = {**REQUEST_HEADERS, **{name.lower(): value for name, value in wanted.headers}}
    for path in wanted.paths:
        yield Request(path, wanted.host, headers)


@dataclass
class Route:
    """One route a reader found serving a request: what the output shows and where a fix goes,
    and the reader's own objects (`handle`), handed back to its `settings` and `rewrite`."""

    describe: str  # e.g. "server api (nginx.conf:12) > location /v1/ (nginx.conf:20) -> proxy_pass ..."
    scope: str  # where a fix for this route goes, not the whole server: "location /v1/ (nginx.conf:20)"
    handle: Any
    host: str | None = None  # the Host a request needs to reach it (None: any Host does)
    catch_all: bool = False  # it serves every path (`location /`): chosen only when nothing else serves
    unknown: list[str] = field(default_factory=list)  # matchers it could not evaluate, taken as matching
    notes: list[str] = field(default_factory=list)  # what the match decided on the way, said to the user


@dataclass
class Chosen:
    """The route verify judges, the request it was found for, why, and every proxied route seen."""

    route: Route
    request: Request
    why: str
    routes: list[str]


class Matching(Protocol):
    """What the search asks of a reader (labs/verify/reader.py's ConfigReader has it all)."""

    @property
    def nothing_proxied(self) -> str: ...

    def proxied(self, config: Any) -> list[str]: ...

    def match(self, config: Any, request: Request) -> Route | None: ...


def choose(reader: Matching, config: Any, wanted: RouteWanted, file: Path) -> Chosen:
    """The route serving the first request some route serves (a route written for the API before
    a catch-all one, unless --path names the path); UnusableInput when none does."""
    routes = reader.proxied(config)
    shown = display_path(file)
    if not routes:
        raise UnusableInput(f"nothing is proxied: {reader.nothing_proxied}", file=shown)
    for accept_catch_all in (False, True):
        for request in requests(wanted):
            route = reader.match(config, request)
            if route is None or (route.catch_all and not accept_catch_all and not wanted.path):
                continue
            return Chosen(route, request, _why(route, request, wanted), routes)
    asked = " or ".join(wanted.paths)
    raise NoRoute(f"no route proxies POST {asked}" + (f" for Host {wanted.host}" if wanted.host else "")
                        + "; the proxied routes are: " + "; ".join(routes)
                        + f" ({_hint(wanted)})", file=shown)


def _hint(wanted: RouteWanted) -> str:
    """What the user can still name: the path, the Host, the headers a matcher reads (an ACL on
    `X-Team`, a route's `headers`: none is sent unless --header names it)."""
    left = ["--path", *(["--host"] if not wanted.host else []), *(["--header"] if not wanted.headers else [])]
    return "choose one with " + (", ".join(left[:-1]) + " or " + left[-1] if len(left) > 1 else left[0])


def _why(route: Route, request: Request, wanted: RouteWanted) -> str:
    if wanted.path:
        why = f"asked for with --path {wanted.path}"
    elif route.catch_all:
        why = (f"it proxies POST {request.path} (a catch-all route: none is written for the API's "
               "usual paths)")
    else:
        why = f"it proxies POST {request.path}, the first of the API's usual paths a route is written for"
    if wanted.host:
        why += f"; chosen for Host {wanted.host}"
    if wanted.headers:
        why += f"; header matchers judged with --header {', '.join(name for name, _ in wanted.headers)}"
    return why
