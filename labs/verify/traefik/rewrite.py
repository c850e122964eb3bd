"""Rewrite a Traefik config to run here, in front of the lab's server (see labs.verify.rewrite).

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
from pathlib import Path
from typing import Any

import yaml

from labs.verify import records
from labs.verify.rewrite import Rewritten
from labs.verify.traefik.config import DYNAMIC_SECTIONS, TraefikConfig, entry_point_names, get, key_of
from proxies.logs import READY_PATH
from server.processes import free_port

MAIN = "traefik.yml"
ACCESS_LOG = "access.log"
STATIC_KEPT = ("entrypoints", "serverstransport", "hostresolver")
# fastProxy changes how every request is forwarded (Traefik's fasthttp proxy instead of Go's, which
# cuts streams just after their headers: docs/field-notes.md#traefiks-early-cut): it is measured.
# The rest of `experimental` (plugins are downloaded) is left out.
EXPERIMENTAL_KEPT = ("fastproxy",)
TLS_OPTIONS = ("rootcas", "certificates", "insecureskipverify", "servername", "peercertsans",
               "peercerturi", "spiffe", "disablehttp2")
CALLS_OUT = {"forwardauth": "it asks an authentication service of yours on every request",
             "plugin": "a plugin is downloaded from the Internet"}


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


def rewrite(config: TraefikConfig, router: str, lab_port: int, folder: Path) -> Rewritten:
    before = merged(config)
    data = copy.deepcopy(before)
    notes: list[str] = []
    result = Rewritten("traefik", folder, folder / MAIN, listen_port=0)
    http = get(data, "http") or {}
    points = get(data, "entryPoints") or _named_points(http)
    chosen_points = _router_points(http, router, points)
    for name, point in points.items():
        port = free_port()
        point = point if isinstance(point, dict) else {}
        point["address"] = f"127.0.0.1:{port}"
        if name == chosen_points[0]:
            result.listen_port = port
        point_http = get(point, "http")
        if isinstance(point_http, dict):
            for option in ("tls", "redirections"):
                key = key_of(point_http, option)
                if key is not None:
                    point_http.pop(key)
                    notes.append(f"entry point {name}: http.{option} is off here (plain HTTP on 127.0.0.1: the "
                                 "lab has no certificate for the config's names)")
            if not point_http:  # Traefik refuses an empty section ("cannot be a standalone element")
                point.pop(key_of(point, "http"))
        points[name] = point
    transport = get(data, "serversTransport")
    for option in list(transport or {}):
        if str(option).lower() in TLS_OPTIONS:
            transport.pop(option)
            notes.append(f"serversTransport: {option} is dropped (the lab's server speaks plain HTTP)")
    _rewrite_dynamic(http, router, lab_port, chosen_points[0], notes)
    forced = {"global": {"checkNewVersion": False, "sendAnonymousUsage": False},
              "entrypoints": points,
              "providers": {"file": {"filename": str(folder / MAIN), "watch": False}},
              "log": {"level": "ERROR"},
              "accesslog": {"filePath": str(folder / ACCESS_LOG), "format": "json"},
              "http": http}
    run: dict[str, Any] = {}
    for key, value in data.items():  # the user's order, so the diff shows only what changed
        lower = str(key).lower()
        if lower in forced:
            run[key] = forced.pop(lower)
        elif lower in STATIC_KEPT:
            run[key] = value
        elif lower == "experimental" and isinstance(value, dict):
            kept = {name: option for name, option in value.items() if str(name).lower() in EXPERIMENTAL_KEPT}
            if kept:
                run[key] = kept
            notes.extend(f"{key}.{name} is left out of the run (it would fetch or report elsewhere)"
                         for name in value if name not in kept)
        else:
            notes.append(f"{key} is left out of the run (it would listen, fetch or report elsewhere)")
    spelled = {"global": "global", "entrypoints": "entryPoints", "providers": "providers", "log": "log",
               "accesslog": "accessLog", "http": "http"}
    run.update({spelled[lower]: value for lower, value in forced.items()})
    result.notes.extend(dict.fromkeys([*config.notes, *notes]))
    result.contacted = lambda: contacted(folder)
    old = yaml.safe_dump(before, sort_keys=False)
    result.files[str(config.file)] = (old, yaml.safe_dump(run, sort_keys=False), folder / MAIN)
    return result


def _rewrite_dynamic(http: dict[str, Any], router: str, lab_port: int, point: str, notes: list[str]) -> None:
    routers = get(http, "routers") or {}
    for name, body in routers.items():
        for option in ("tls",):
            key = key_of(body, option)
            if key is not None:
                body.pop(key)
                notes.append(f"router {name}: tls is off here (plain HTTP)")
    routers["streamlab-ready"] = {"entryPoints": [point], "rule": f"Path(`{READY_PATH}`)",
                                  "service": "noop@internal", "priority": 2**31 - 1}
    for name, body in (get(http, "middlewares") or {}).items():
        kind = str(next(iter(body), "")).lower() if isinstance(body, dict) else ""
        if kind in CALLS_OUT:
            body.clear()
            # A middleware that changes nothing that matters, so routers naming it still load.
            body["headers"] = {"customRequestHeaders": {"X-Streamlab-Left-Out": name}}
            notes.append(f"middleware {name} is left out: {CALLS_OUT[kind]}")
    for name, body in (get(http, "services") or {}).items():
        balancer = get(body, "loadBalancer")
        if isinstance(balancer, dict):
            servers = get(balancer, "servers") or [{}]
            key = key_of(balancer, "servers") or "servers"
            balancer[key] = [{"url": f"http://127.0.0.1:{lab_port}"} for _ in servers[:1]]
            for option in ("healthCheck", "sticky"):
                found = key_of(balancer, option)
                if found is not None and option == "healthCheck":
                    balancer.pop(found)
                    notes.append(f"service {name}: health checks are off (they would probe the lab's server)")
    for name, body in (get(http, "serversTransports") or {}).items():
        for option in list(body or {}):
            if str(option).lower() in TLS_OPTIONS:
                body.pop(option)
                notes.append(f"servers transport {name}: {option} is dropped (the lab's server speaks plain HTTP)")
    http.setdefault(key_of(http, "routers") or "routers", routers)


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
