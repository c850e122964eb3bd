"""Which Envoy listener, virtual host, route and cluster serve one request, as Envoy chooses them.

The chain is listener -> HTTP connection manager -> virtual host (by the Host's domain) -> the
first route whose match holds (match.py) -> its cluster. Only a route that sends to a cluster the
config declares proxies the request; the search over paths and its error are labs/verify/route.py's.
"""
from __future__ import annotations

from dataclasses import dataclass

from labs.findings import UnusableInput
from labs.verify.envoy.config import EnvoyConfig, YamlMap, hcms
from labs.verify.envoy.match import route_matches, select_vhost
from labs.verify.model import display_path
from labs.verify.route import Request, Route

# A route whose path matcher takes every path: chosen only when none is written for the API.
CATCH_ALL_PREFIXES = ("", "/")


@dataclass
class EnvoyRoute:
    """The objects that serve the request, handed back to the settings and the rewrite."""

    listener: YamlMap
    chain: YamlMap
    hcm: YamlMap
    vhost: YamlMap
    route: YamlMap
    cluster: YamlMap


def match(config: EnvoyConfig, request: Request) -> Route | None:
    notes: list[str] = []
    clusters = {c.get("name"): c for c in config.static.items_list("clusters")}
    for listener, chain, hcm in _managers(config):
        vhosts = hcm.mapping("route_config").items_list("virtual_hosts")
        if request.host is not None:  # Envoy picks the one virtual host the Host selects, by its domains
            chosen = select_vhost(vhosts, request.host)
            vhosts = [chosen] if chosen is not None else []
        for vhost in vhosts:
            answers_for = _host([str(d) for d in vhost.get("domains", ["*"])])
            for route in vhost.items_list("routes"):
                if not route_matches(route.mapping("match"), request, request.host or answers_for, notes.append):
                    continue
                if "route" not in route:  # a redirect or a direct response: nothing proxied
                    continue
                action = route.mapping("route")
                name = action.get("cluster") or next(
                    (c.get("name") for c in action.mapping("weighted_clusters").items_list("clusters")), None)
                if name in clusters:
                    found = EnvoyRoute(listener, chain, hcm, vhost, route, clusters[name])
                    return _described(config, found, request, answers_for, notes)
    return None


def _described(config: EnvoyConfig, found: EnvoyRoute, request: Request, answers_for: str | None,
               notes: list[str]) -> Route:
    shown = display_path(config.path)
    if answers_for:
        notes.append(f"the route's virtual host answers only for {answers_for!r}: verify's requests carry that "
                     "Host header")
    matcher = found.route.mapping("match")
    return Route(
        describe=(f"listener {found.listener.get('name', '?')} ({shown}:{found.listener.line()}) > virtual host "
                  f"{found.vhost.get('name', '?')} > route {dict(matcher)} ({shown}:{found.route.line()}) > "
                  f"cluster {found.cluster.get('name')} ({shown}:{found.cluster.line()})"),
        scope=f"the route at {shown}:{found.route.line()}", handle=found, host=request.host or answers_for,
        catch_all=set(matcher) == {"prefix"} and str(matcher["prefix"]) in CATCH_ALL_PREFIXES,
        notes=list(dict.fromkeys(notes)))


def proxied(config: EnvoyConfig) -> list[str]:
    """Every route that sends to a cluster, for the output (the judged one among them)."""
    shown = display_path(config.path)
    out = []
    for listener, _, hcm in _managers(config):
        for vhost in hcm.mapping("route_config").items_list("virtual_hosts"):
            for route in vhost.items_list("routes"):
                action = route.mapping("route") if "route" in route else None
                if action is None:
                    continue
                target = action.get("cluster") or "weighted clusters"
                out.append(f"listener {listener.get('name', '?')} > virtual host {vhost.get('name', '?')} > "
                           f"route {dict(route.mapping('match'))} ({shown}:{route.line()}) -> cluster {target}")
    return out


def _managers(config: EnvoyConfig) -> list[tuple[YamlMap, YamlMap, YamlMap]]:
    """(listener, filter chain, HTTP connection manager) of every static route table."""
    found = []
    for listener in config.static.items_list("listeners"):
        for chain, hcm in hcms(listener):
            if "rds" in hcm:
                raise UnusableInput("the route table comes from RDS (xDS); verify reads static route_config only",
                                    file=str(config.path), line=hcm.line("rds"))
            found.append((listener, chain, hcm))
    return found


def _host(domains: list[str]) -> str | None:
    """The Host a request needs to reach a virtual host (None: any Host does)."""
    if "*" in domains:
        return None
    first = domains[0]
    return first.replace("*", "verify", 1) if "*" in first else first
