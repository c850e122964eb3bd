"""Which Envoy listener, route and cluster serve `POST /v1/chat/completions`, and what is in effect.

The chain is listener -> HTTP connection manager (timeouts, HTTP filters) -> virtual host (by
domain) -> the first route whose match holds -> its cluster (circuit breakers). Where nothing is
set, Envoy's own defaults apply: route timeout 15 s, stream_idle_timeout 5 min, circuit-breaker
thresholds 1024.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.envoy.config import YamlMap, duration_s, load, typed
from labs.verify.model import DEFAULT, Reading, RouteWanted, Setting, display_path

HCM_TYPE = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
BREAKER_DEFAULTS = {"max_connections": 1024, "max_pending_requests": 1024, "max_requests": 1024}


@dataclass
class EnvoyRoute:
    listener: YamlMap
    chain: YamlMap
    hcm: YamlMap
    vhost: YamlMap
    route: YamlMap
    cluster: YamlMap
    host_header: str | None  # what a request must carry to reach that virtual host
    path: str = ""  # the request path it was chosen for


def hcms(listener: YamlMap) -> list[tuple[YamlMap, YamlMap]]:
    found = []
    for chain in listener.items_list("filter_chains"):
        for item in chain.items_list("filters"):
            if HCM_TYPE in typed(item):
                found.append((chain, item.mapping("typed_config")))
    return found


def select_route(data: YamlMap, file: Path, wanted: RouteWanted = RouteWanted()) -> EnvoyRoute:
    """The route that serves the first of `wanted.paths` some listener routes to a cluster."""
    for route_path in wanted.paths:
        found = _route_for(data, file, route_path)
        if found is not None:
            found.path = route_path
            return found
    raise UnusableInput(f"no listener routes POST {' or '.join(wanted.paths)} to a cluster (static_resources: "
                        "listeners with an http_connection_manager, a route whose match holds, a known cluster)",
                        file=str(file))


def _route_for(data: YamlMap, file: Path, route_path: str) -> EnvoyRoute | None:
    static = data.mapping("static_resources")
    clusters = {c.get("name"): c for c in static.items_list("clusters")}
    for listener in static.items_list("listeners"):
        for chain, hcm in hcms(listener):
            if "rds" in hcm:
                raise UnusableInput("the route table comes from RDS (xDS); verify reads static route_config only",
                                    file=str(file), line=hcm.line("rds"))
            for vhost in hcm.mapping("route_config").items_list("virtual_hosts"):
                domains = [str(d) for d in vhost.get("domains", ["*"])]
                for route in vhost.items_list("routes"):
                    if not _matches(route.mapping("match"), route_path) or "route" not in route:
                        continue
                    action = route.mapping("route")
                    name = action.get("cluster") or next(
                        (c.get("name") for c in action.mapping("weighted_clusters").items_list("clusters")), None)
                    if name in clusters:
                        return EnvoyRoute(listener, chain, hcm, vhost, route, clusters[name], _host(domains))
    return None


def _matches(match: YamlMap, route_path: str) -> bool:
    if "prefix" in match:
        return route_path.startswith(str(match["prefix"]))
    if "path" in match:
        return route_path == str(match["path"])
    if "path_separated_prefix" in match:
        prefix = str(match["path_separated_prefix"])
        return route_path == prefix or route_path.startswith(prefix + "/")
    if "safe_regex" in match:
        return re.fullmatch(str(match.mapping("safe_regex").get("regex", "")), route_path) is not None
    return False


def _host(domains: list[str]) -> str | None:
    if "*" in domains:
        return None
    first = domains[0]
    return first.replace("*", "verify", 1) if "*" in first else first


def read(path: Path, wanted: RouteWanted = RouteWanted()) -> Reading:
    _, data = load(path)
    chosen = select_route(data, path, wanted)
    shown = display_path(path)
    reading = Reading(proxy="envoy", file=path, path=chosen.path, host=wanted.host or chosen.host_header,
                      why=f"asked for with --path {wanted.path}" if wanted.path else
                      f"the first of the API's usual paths a route sends to a cluster: POST {chosen.path}", route=(
        f"listener {chosen.listener.get('name', '?')} ({shown}:{chosen.listener.line()}) > virtual host "
        f"{chosen.vhost.get('name', '?')} > route {dict(chosen.route.mapping('match'))} "
        f"({shown}:{chosen.route.line()}) > cluster {chosen.cluster.get('name')} ({shown}:{chosen.cluster.line()})"))

    def setting(name: str, owner: YamlMap, key: str, default: float | None, text_default: str) -> None:
        if key in owner:
            value = duration_s(owner[key])
            reading.settings[name] = Setting(name, value, f"{key}: {owner[key]}", f"{shown}:{owner.line(key)}")
        else:
            reading.settings[name] = Setting(name, default, text_default, DEFAULT)

    action = chosen.route.mapping("route")
    setting("route timeout", action, "timeout", 15.0, "timeout: 15s (Envoy's default)")
    setting("route idle_timeout", action, "idle_timeout", None, "idle_timeout: (none)")
    setting("stream_idle_timeout", chosen.hcm, "stream_idle_timeout", 300.0, "stream_idle_timeout: 300s (default)")
    setting("request_timeout", chosen.hcm, "request_timeout", None, "request_timeout: (none)")
    common = chosen.hcm.mapping("common_http_protocol_options")
    setting("max_stream_duration", common, "max_stream_duration", None, "max_stream_duration: (none)")
    route_max = action.mapping("max_stream_duration")
    if "max_stream_duration" in route_max:
        setting("route max_stream_duration", route_max, "max_stream_duration", None, "")
    filters = chosen.hcm.items_list("http_filters")
    reading.settings["http_filters"] = Setting(
        "http_filters", filters, ", ".join(str(f.get("name")) for f in filters) or "(none)",
        f"{shown}:{chosen.hcm.line('http_filters')}" if "http_filters" in chosen.hcm else DEFAULT)
    thresholds = next(iter(chosen.cluster.mapping("circuit_breakers").items_list("thresholds")), None)
    for key, default in BREAKER_DEFAULTS.items():
        if isinstance(thresholds, YamlMap) and key in thresholds:
            reading.settings[key] = Setting(key, int(thresholds[key]), f"{key}: {thresholds[key]}",
                                            f"{shown}:{thresholds.line(key)}")
        else:
            reading.settings[key] = Setting(key, default, f"{key}: {default} (default)", DEFAULT)
    reading.settings["cluster type"] = Setting(
        "cluster type", chosen.cluster.get("type", "STATIC"), f"type: {chosen.cluster.get('type', 'STATIC')}",
        f"{shown}:{chosen.cluster.line('type')}" if "type" in chosen.cluster else DEFAULT)
    if chosen.host_header:
        reading.notes.append(f"the route's virtual host answers only for {chosen.host_header!r}: "
                             "verify's requests carry that Host header")
    return reading
