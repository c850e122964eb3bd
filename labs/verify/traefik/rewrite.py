"""Rewrite a Traefik config to run here, in front of the lab's server (see labs.verify.rewrite), in
memory: one handler per option (`HANDLERS`, by section: the static file's own keys, then
`entrypoint.`, `serverstransport.`, `router.`, `middleware.` (by its kind), `service.` (by its
kind) and `loadbalancer.`, all lower case as Traefik matches them), and the options kept as written
declared (`KEPT`): the streaming settings verify measures.

What runs is one YAML file holding the static part and the dynamic part its file provider reads
from that same file (as proxies/fixed/traefik.yml does): every entry point listens on a free
loopback port, plain HTTP (its TLS, certificate resolvers and redirections go: the lab has no
certificate for the config's names); every server of every load balancer is the lab's server and
servers transports lose their TLS settings; providers other than the file (Docker, Kubernetes,
...), the API and dashboard, metrics, tracing, plugins and anything else that would contact
another host are left out; routers lose their `tls`. Middlewares that call another service
(forwardAuth) or a plugin are left out, each said. Version check and usage statistics are off.
A JSON access log in the run folder records the upstream each request was sent to.

The diff is between the configuration as Traefik would hold it (static and dynamic parts merged,
as YAML) and what runs: comments and layout are not Traefik's to keep.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from labs.verify import records
from labs.verify.plan import RunPlan, handler_for, reason
from labs.verify.rewrite import Rewritten
from labs.verify.traefik.config import DYNAMIC_SECTIONS, TraefikConfig, entry_point_names, get, key_of
from proxies.logs import READY_PATH
from server.processes import free_port

MAIN = "traefik.yml"
ACCESS_LOG = "access.log"
# fastProxy changes how every request is forwarded (Traefik's fasthttp proxy instead of Go's, which
# cuts streams just after their headers: docs/field-notes.md#traefiks-early-cut): it is measured.
# The rest of `experimental` (plugins are downloaded) is left out.
EXPERIMENTAL_KEPT = ("fastproxy",)
TLS_OPTIONS = ("rootcas", "certificates", "insecureskipverify", "servername", "peercertsans",
               "peercerturi", "spiffe", "disablehttp2")
CALLS_OUT = {"forwardauth": "it asks an authentication service of yours on every request",
             "plugin": "a plugin is downloaded from the Internet"}
Handler = Callable[["Run", dict, str], None]


@dataclass
class Run:
    """One rewrite in progress: the plan, its entry points, what it says, and the object the walk
    is in (`where`, for the notes)."""

    plan: RunPlan
    result: Rewritten
    points: dict[str, Any] = field(default_factory=dict)  # the run's entry points
    point: str = ""  # the entry point the judged router listens on
    notes: list[str] = field(default_factory=list)
    where: str = ""

    def visit(self, section: str, owner: Any, where: str) -> None:
        """Each option's handler; an option without one, or declared kept, is kept as written."""
        self.where = where
        for key in list(owner or {}):
            name = f"{section}.{key}".lower() if section else str(key).lower()
            handler = handler_for(HANDLERS, name)
            if handler is not None and name not in KEPT:
                handler(self, owner, key)


def contacted(folder: Path) -> set[str]:
    found: set[str] = set()
    for line in records.log_text(folder, ACCESS_LOG).splitlines():
        try:
            address = json.loads(line).get("ServiceAddr")
        except (json.JSONDecodeError, AttributeError):
            continue
        if address:
            found.add(str(address))
    return found


def as_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): as_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_plain(v) for v in value]
    return value


def merged(config: TraefikConfig) -> dict[str, Any]:
    """The configuration as Traefik holds it: the static part, and the dynamic files' `http:`."""
    static = {k: v for k, v in as_plain(config.static).items() if str(k).lower() != "http"}
    http: dict[str, dict[str, Any]] = {}
    for section in DYNAMIC_SECTIONS:
        items = config.section(section)
        if items:
            http[_spelling(config, section)] = {name: as_plain(item.body) for name, item in items.items()}
    return {**static, "http": http} if http else static


def rewrite(config: TraefikConfig, router: str, plan: RunPlan) -> Rewritten:
    before = merged(config)
    data = copy.deepcopy(before)
    folder = plan.folder
    run = Run(plan, Rewritten("traefik", folder, folder / MAIN, listen_port=0))
    http = get(data, "http") or {}
    run.points = get(data, "entryPoints") or _named_points(http)
    run.point = _router_points(http, router, run.points)[0]
    _entry_points(run)
    _dynamic(run, http)
    forced = {"global": {"checkNewVersion": False, "sendAnonymousUsage": False},
              "entrypoints": run.points,
              "providers": {"file": {"filename": str(folder / MAIN), "watch": False}},
              "log": {"level": "ERROR"},
              "accesslog": {"filePath": str(folder / ACCESS_LOG), "format": "json"},
              "http": http}
    run.visit("", data, "")  # what is left is the run's own sections and what is kept
    spelled = {"global": "global", "entrypoints": "entryPoints", "providers": "providers", "log": "log",
               "accesslog": "accessLog", "http": "http"}
    # The user's order and spelling, so the diff shows only what changed; the run's own sections after.
    written = {key: forced.pop(str(key).lower(), value) for key, value in data.items()}
    written.update({spelled[lower]: value for lower, value in forced.items()})
    result = run.result
    result.notes.extend(dict.fromkeys([*config.notes, *run.notes]))
    result.contacted = lambda: contacted(folder)
    old = yaml.safe_dump(before, sort_keys=False)
    result.files[str(config.file)] = (old, yaml.safe_dump(written, sort_keys=False), folder / MAIN)
    return result


def directives(config: TraefikConfig) -> Iterator[str]:
    """Every option the handlers are looked up by, spelt (lower case) as `HANDLERS` and `KEPT` spell them."""
    data = merged(config)
    yield from (str(key).lower() for key in data)
    for point in (get(data, "entryPoints") or {}).values():
        yield from (f"entrypoint.{key}".lower() for key in point or {})
    yield from (f"serverstransport.{key}".lower() for key in get(data, "serversTransport") or {})
    http = get(data, "http") or {}
    for section, prefix in (("routers", "router"), ("middlewares", "middleware"), ("services", "service"),
                            ("serversTransports", "serverstransport")):
        for body in (get(http, section) or {}).values():
            yield from (f"{prefix}.{key}".lower() for key in body or {})
    for body in (get(http, "services") or {}).values():
        yield from (f"loadbalancer.{key}".lower() for key in get(body, "loadBalancer") or {})


def _entry_points(run: Run) -> None:
    """Every entry point on a free loopback port (the judged router's is the one measured)."""
    for name, point in list(run.points.items()):
        port = free_port()
        point = point if isinstance(point, dict) else {}
        point["address"] = f"127.0.0.1:{port}"  # whatever the user's, or none
        if name == run.point:
            run.result.listen_port = port
        run.visit("entrypoint", point, f"entry point {name}")
        run.points[name] = point


def _entry_point_http(run: Run, point: dict, key: str) -> None:
    point_http = point[key]
    if not isinstance(point_http, dict):
        return
    for option in ("tls", "redirections"):
        found = key_of(point_http, option)
        if found is not None:
            point_http.pop(found)
            run.notes.append(f"{run.where}: http.{option} is off here (plain HTTP on 127.0.0.1: {reason('no-certificate')})")
    if not point_http:  # Traefik refuses an empty section ("cannot be a standalone element")
        point.pop(key)


def _tls_option(run: Run, transport: dict, key: str) -> None:
    transport.pop(key)
    run.notes.append(f"{run.where}: {key} is dropped ({reason('upstream-tls')})")


def _static_transport(run: Run, data: dict, key: str) -> None:
    run.visit("serverstransport", data[key], "serversTransport")


def _experimental(run: Run, data: dict, key: str) -> None:
    value = data[key]
    if not isinstance(value, dict):
        _left_out(run, data, key)
        return
    kept = {name: option for name, option in value.items() if str(name).lower() in EXPERIMENTAL_KEPT}
    run.notes.extend(f"{key}.{name} is left out of the run ({reason('elsewhere')})" for name in value if name not in kept)
    if kept:
        data[key] = kept
    else:
        data.pop(key)


def _left_out(run: Run, data: dict, key: str) -> None:
    data.pop(key)
    run.notes.append(f"{key} is left out of the run ({reason('elsewhere')})")


def _the_runs_own(run: Run, data: dict, key: str) -> None:
    """global, entryPoints, providers, log, accessLog, http: the run writes its own (rewrite())."""


def _dynamic(run: Run, http: dict) -> None:
    routers = get(http, "routers") or {}
    for name, body in routers.items():
        run.visit("router", body, f"router {name}")
    routers["streamlab-ready"] = {"entryPoints": [run.point], "rule": f"Path(`{READY_PATH}`)",
                                  "service": "noop@internal", "priority": 2**31 - 1}
    for name, body in (get(http, "middlewares") or {}).items():
        run.visit("middleware", body if isinstance(body, dict) else {}, f"middleware {name}")
    for name, body in (get(http, "services") or {}).items():
        run.visit("service", body, f"service {name}")
    for name, body in (get(http, "serversTransports") or {}).items():
        run.visit("serverstransport", body, f"servers transport {name}")
    http.setdefault(key_of(http, "routers") or "routers", routers)


def _router_tls(run: Run, router: dict, key: str) -> None:
    router.pop(key)
    run.notes.append(f"{run.where}: tls is off here (plain HTTP)")


def _calls_out(run: Run, middleware: dict, key: str) -> None:
    why = CALLS_OUT[str(key).lower()]
    middleware.clear()
    # A middleware that changes nothing that matters, so routers naming it still load.
    middleware["headers"] = {"customRequestHeaders": {"X-Streamlab-Left-Out": run.where.removeprefix("middleware ")}}
    run.notes.append(f"{run.where} is left out: {why}")


def _load_balancer(run: Run, service: dict, key: str) -> None:
    balancer = service[key]
    if not isinstance(balancer, dict):
        return
    balancer.setdefault(key_of(balancer, "servers") or "servers", [{}])
    run.visit("loadbalancer", balancer, run.where)


def _servers(run: Run, balancer: dict, key: str) -> None:
    # One server at the lab's; under `verify --mcp` server k is replica k (RunPlan.pool_ports).
    kept = (balancer[key] or [{}]) if run.plan.pool_ports else (balancer[key] or [{}])[:1]
    balancer[key] = [{"url": f"http://127.0.0.1:{run.plan.upstream_port(index)}"} for index in range(len(kept))]


def _health_check(run: Run, balancer: dict, key: str) -> None:
    balancer.pop(key)
    run.notes.append(f"{run.where}: {reason('health-check')}")


HANDLERS: dict[str, Handler] = {
    "*": _left_out,  # what would listen, fetch or report elsewhere (the API, metrics, tracing, ...)
    **dict.fromkeys(("global", "entrypoints", "providers", "log", "accesslog", "http"), _the_runs_own),
    "serverstransport": _static_transport, "experimental": _experimental,
    "entrypoint.http": _entry_point_http,
    **{f"serverstransport.{option}": _tls_option for option in TLS_OPTIONS},
    "router.tls": _router_tls,
    **{f"middleware.{kind}": _calls_out for kind in CALLS_OUT},
    "service.loadbalancer": _load_balancer,
    "loadbalancer.servers": _servers, "loadbalancer.healthcheck": _health_check,
}
# Kept as written: what the run measures (timeouts, flushing, middlewares) and what contacts no one.
KEPT = frozenset({
    "hostresolver",
    "entrypoint.address", "entrypoint.transport", "entrypoint.asdefault", "entrypoint.forwardedheaders",
    "entrypoint.proxyprotocol", "entrypoint.http2",
    "serverstransport.forwardingtimeouts", "serverstransport.maxidleconnsperhost",
    "router.rule", "router.service", "router.middlewares", "router.entrypoints", "router.priority",
    "router.rulesyntax", "router.observability",
    "middleware.buffering", "middleware.compress", "middleware.inflightreq", "middleware.retry",
    "middleware.headers", "middleware.chain", "middleware.stripprefix", "middleware.stripprefixregex",
    "middleware.addprefix", "middleware.replacepath", "middleware.replacepathregex", "middleware.ratelimit",
    "middleware.basicauth", "middleware.ipallowlist", "middleware.circuitbreaker",
    "middleware.redirectscheme", "middleware.redirectregex",
    "loadbalancer.responseforwarding", "loadbalancer.serverstransport", "loadbalancer.passhostheader",
    "loadbalancer.sticky",
})


def _router_points(http: dict[str, Any], router: str, points: dict[str, Any]) -> list[str]:
    named = [n for n in entry_point_names(get(get(http, "routers"), router)) if n in points]
    return named or list(points)


def _named_points(http: dict[str, Any]) -> dict[str, Any]:
    """A dynamic file alone: the entry points its routers name (the static part elsewhere declares
    them; a router on one the run lacks is served nowhere: aijias-litellm-traefik's 404, its
    `entrypoints: websecure`), or `web` where they name none."""
    names = [n for body in (get(http, "routers") or {}).values() for n in entry_point_names(body)]
    return {name: {} for name in dict.fromkeys(names)} or {"web": {}}


def _spelling(config: TraefikConfig, section: str) -> str:
    for _, _, data in config.dynamic_files:
        found = key_of(get(data, "http"), section)
        if found:
            return found
    return section


def addresses(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Every address the run's config names: entry points and servers (the loopback proof)."""
    out: list[tuple[str, str]] = []
    for name, point in (get(data, "entryPoints") or {}).items():
        host = str(get(point, "address") or "").rsplit(":", 1)[0]
        out.append((f"entry point {name}", host or "0.0.0.0"))
    for name, body in (get(get(data, "http"), "services") or {}).items():
        for server in get(get(body, "loadBalancer"), "servers") or []:
            url = str(get(server, "url") or "")
            host = url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
            out.append((f"service {name}", host))
    return out
