"""Which Envoy listener, route and cluster serve `POST /v1/chat/completions`, and what is in effect.

The chain is listener -> HTTP connection manager (timeouts, HTTP filters) -> virtual host (by
domain) -> the first route whose match holds -> its cluster (circuit breakers). Where nothing is
set, Envoy's own defaults apply: route timeout 15 s, stream_idle_timeout 5 min, circuit-breaker
thresholds 1024.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.envoy import versions
from labs.verify.envoy.config import YamlMap, duration_s, load, typed
from labs.verify.envoy.match import route_matches, select_vhost
from labs.verify.model import DEFAULT, Reading, RouteWanted, Setting, display_path
from proxies.binaries import find_binary

HCM_TYPE = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
BREAKERS = ("max_connections", "max_pending_requests", "max_requests")  # defaults: versions.BASE


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
    notes: list[str] = field(default_factory=list)  # matchers verify could not evaluate


def hcms(listener: YamlMap) -> list[tuple[YamlMap, YamlMap]]:
    found = []
    for chain in listener.items_list("filter_chains"):
        for item in chain.items_list("filters"):
            if HCM_TYPE in typed(item):
                found.append((chain, item.mapping("typed_config")))
    return found


def select_route(data: YamlMap, file: Path, wanted: RouteWanted = RouteWanted()) -> EnvoyRoute:
    """The route that serves the first of `wanted.paths` some listener routes to a cluster."""
    notes: list[str] = []
    for route_path in wanted.paths:
        found = _route_for(data, file, route_path, wanted.host, notes, wanted.headers)
        if found is not None:
            found.path = route_path
            found.notes = list(dict.fromkeys(notes))
            return found
    unread = f" ({'; '.join(dict.fromkeys(notes))})" if notes else ""
    raise UnusableInput(f"no listener routes POST {' or '.join(wanted.paths)}"
                        f"{f' for Host {wanted.host}' if wanted.host else ''} to a cluster (static_resources: "
                        "listeners with an http_connection_manager, a virtual host for the Host, a route whose "
                        f"match holds, a known cluster){unread}", file=str(file))


def _route_for(data: YamlMap, file: Path, route_path: str, host: str | None,
               notes: list[str], extra: tuple[tuple[str, str], ...] = ()) -> EnvoyRoute | None:
    static = data.mapping("static_resources")
    clusters = {c.get("name"): c for c in static.items_list("clusters")}
    for listener in static.items_list("listeners"):
        for chain, hcm in hcms(listener):
            if "rds" in hcm:
                raise UnusableInput("the route table comes from RDS (xDS); verify reads static route_config only",
                                    file=str(file), line=hcm.line("rds"))
            vhosts = hcm.mapping("route_config").items_list("virtual_hosts")
            if host is not None:  # Envoy picks the one virtual host the Host selects, by its domains
                chosen = select_vhost(vhosts, host)
                vhosts = [chosen] if chosen is not None else []
            for vhost in vhosts:
                domains = [str(d) for d in vhost.get("domains", ["*"])]
                header_host = host or _host(domains)
                for route in vhost.items_list("routes"):
                    if not route_matches(route.mapping("match"), route_path, header_host, notes.append, extra):
                        continue
                    if "route" not in route:
                        continue
                    action = route.mapping("route")
                    name = action.get("cluster") or next(
                        (c.get("name") for c in action.mapping("weighted_clusters").items_list("clusters")), None)
                    if name in clusters:
                        return EnvoyRoute(listener, chain, hcm, vhost, route, clusters[name], _host(domains))
    return None


def proxied_routes(data: YamlMap, shown: str) -> list[str]:
    """Every route that sends to a cluster, for the output (the judged one among them)."""
    out = []
    for listener in data.mapping("static_resources").items_list("listeners"):
        for _, hcm in hcms(listener):
            for vhost in hcm.mapping("route_config").items_list("virtual_hosts"):
                for route in vhost.items_list("routes"):
                    action = route.mapping("route") if "route" in route else None
                    if action is None:
                        continue
                    target = action.get("cluster") or "weighted clusters"
                    out.append(f"listener {listener.get('name', '?')} > virtual host {vhost.get('name', '?')} > "
                               f"route {dict(route.mapping('match'))} ({shown}:{route.line()}) -> cluster {target}")
    return out


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
        f"({shown}:{chosen.route.line()}) > cluster {chosen.cluster.get('name')} ({shown}:{chosen.cluster.line()})"),
                      routes=proxied_routes(data, shown),
                      scope=f"the route at {shown}:{chosen.route.line()}")

    def setting(name: str, owner: YamlMap, key: str, default: float | None, text_default: str) -> None:
        if key in owner:
            value = duration_s(owner[key])
            reading.settings[name] = Setting(name, value, f"{key}: {owner[key]}", f"{shown}:{owner.line(key)}")
        else:
            reading.settings[name] = Setting(name, default, text_default, DEFAULT)

    version, said = versions.TABLE.chosen(wanted.version, find_binary("envoy", wanted.series))
    reading.version = versions.shown(version)
    reading.notes.append(said)
    table = versions.TABLE.defaults(version)

    def default(name: str) -> float | None:
        return duration_s(table[name]) if table[name] else None

    def shown_default(key: str, name: str) -> str:
        return f"{key}: {table[name]} (Envoy's default)" if table[name] else f"{key}: (none)"

    action = chosen.route.mapping("route")
    for name, owner, key in (("route timeout", action, "timeout"), ("route idle_timeout", action, "idle_timeout"),
                             ("stream_idle_timeout", chosen.hcm, "stream_idle_timeout"),
                             ("request_timeout", chosen.hcm, "request_timeout")):
        setting(name, owner, key, default(name), shown_default(key, name))
    request = reading.settings["request_timeout"]
    if request.value:
        reading.settings["request_timeout"] = Setting(
            request.name, request.value, f"{request.text} (bounds receiving the request, not the response)",
            request.where)
    common = chosen.hcm.mapping("common_http_protocol_options")
    setting("max_stream_duration", common, "max_stream_duration", default("max_stream_duration"),
            shown_default("max_stream_duration", "max_stream_duration"))
    route_max = action.mapping("max_stream_duration")
    if "max_stream_duration" in route_max:
        setting("route max_stream_duration", route_max, "max_stream_duration", None, "")
    _in_effect(reading, route_max)
    filters = chosen.hcm.items_list("http_filters")
    reading.settings["http_filters"] = Setting(
        "http_filters", filters, ", ".join(str(f.get("name")) for f in filters) or "(none)",
        f"{shown}:{chosen.hcm.line('http_filters')}" if "http_filters" in chosen.hcm else DEFAULT)
    thresholds = next(iter(chosen.cluster.mapping("circuit_breakers").items_list("thresholds")), None)
    for key in BREAKERS:
        if isinstance(thresholds, YamlMap) and key in thresholds:
            reading.settings[key] = Setting(key, int(thresholds[key]), f"{key}: {thresholds[key]}",
                                            f"{shown}:{thresholds.line(key)}")
        else:
            reading.settings[key] = Setting(key, int(table[key]), f"{key}: {table[key]} (default)", DEFAULT)
    if "cluster_type" in chosen.cluster:
        extension = chosen.cluster.mapping("cluster_type").get("name", "?")
        reading.settings["cluster type"] = Setting("cluster type", extension, f"cluster_type: {extension}",
                                                   f"{shown}:{chosen.cluster.line('cluster_type')}")
    else:
        reading.settings["cluster type"] = Setting(
            "cluster type", chosen.cluster.get("type", "STATIC"), f"type: {chosen.cluster.get('type', 'STATIC')}",
            f"{shown}:{chosen.cluster.line('type')}" if "type" in chosen.cluster else DEFAULT)
    reading.notes.extend(chosen.notes)
    if chosen.host_header:
        reading.notes.append(f"the route's virtual host answers only for {chosen.host_header!r}: "
                             "verify's requests carry that Host header")
    return reading


def _in_effect(reading: Reading, route_max: YamlMap) -> None:
    """The one idle timeout and the one stream-duration cap the route runs under.

    Envoy: a route's idle_timeout overrides the connection manager's stream_idle_timeout (0
    disables it for the route); a route's max_stream_duration.max_stream_duration overrides
    common_http_protocol_options.max_stream_duration (0 disables it for the route).
    grpc_timeout_header_max applies only to requests carrying grpc-timeout, which verify's does not."""
    route_idle, hcm_idle = reading.get("route idle_timeout"), reading.get("stream_idle_timeout")
    if not route_idle.is_default:
        reading.settings["idle timeout"] = Setting(
            "idle timeout", route_idle.value or None,
            f"{route_idle.text} on the route{' (disabled)' if not route_idle.value else ''} "
            f"(overrides {hcm_idle.text})", route_idle.where)
    else:
        reading.settings["idle timeout"] = Setting(
            "idle timeout", hcm_idle.value or None,
            f"{hcm_idle.text}{' (disabled)' if not hcm_idle.value else ''} (no route idle_timeout)", hcm_idle.where)
    route_cap, hcm_cap = reading.settings.get("route max_stream_duration"), reading.get("max_stream_duration")
    if route_cap is not None:
        reading.settings["stream duration"] = Setting(
            "stream duration", route_cap.value or None,
            f"{route_cap.text} on the route{' (disabled)' if not route_cap.value else ''} "
            f"(overrides {hcm_cap.text})", route_cap.where)
    else:
        reading.settings["stream duration"] = Setting(
            "stream duration", hcm_cap.value or None, hcm_cap.text, hcm_cap.where)
    for key in ("grpc_timeout_header_max", "grpc_timeout_header_offset"):
        if key in route_max:
            reading.notes.append(f"max_stream_duration.{key} applies only to requests carrying a grpc-timeout "
                                 "header; verify's request carries none, so it does not bound this stream")
