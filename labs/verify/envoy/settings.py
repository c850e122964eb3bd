"""What is in effect on the Envoy route verify judges (routes.py finds it): the route's and the
connection manager's timeouts, its HTTP filters, its cluster's circuit breakers and type.

Where nothing is set, Envoy's own defaults apply, by version (versions.py): route timeout 15 s,
stream_idle_timeout 5 min, circuit-breaker thresholds 1024.
"""
from __future__ import annotations

from labs.verify.envoy import versions
from labs.verify.envoy.config import EnvoyConfig, YamlMap, duration_s
from labs.verify.envoy.routes import EnvoyRoute
from labs.verify.model import DEFAULT, RouteWanted, Setting, display_path
from labs.verify.reader import InEffect
from labs.verify.route import Chosen
from proxies.binaries import find_binary

BREAKERS = ("max_connections", "max_pending_requests", "max_requests")  # defaults: versions.BASE


def settings(config: EnvoyConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
    found: EnvoyRoute = chosen.route.handle
    shown = display_path(config.path)
    in_effect = InEffect({})

    def setting(name: str, owner: YamlMap, key: str, default: float | None, text_default: str) -> None:
        if key in owner:
            value = duration_s(owner[key])
            in_effect.settings[name] = Setting(name, value, f"{key}: {owner[key]}", f"{shown}:{owner.line(key)}")
        else:
            in_effect.settings[name] = Setting(name, default, text_default, DEFAULT)

    version, said = versions.TABLE.chosen(wanted.version, find_binary("envoy", wanted.series))
    in_effect.version = versions.shown(version)
    in_effect.notes.append(said)
    table = versions.TABLE.defaults(version)

    def default(name: str) -> float | None:
        return duration_s(table[name]) if table[name] else None

    def shown_default(key: str, name: str) -> str:
        return f"{key}: {table[name]} (Envoy's default)" if table[name] else f"{key}: (none)"

    action = found.route.mapping("route")
    for name, owner, key in (("route timeout", action, "timeout"), ("route idle_timeout", action, "idle_timeout"),
                             ("stream_idle_timeout", found.hcm, "stream_idle_timeout"),
                             ("request_timeout", found.hcm, "request_timeout")):
        setting(name, owner, key, default(name), shown_default(key, name))
    request = in_effect.settings["request_timeout"]
    if request.value:
        in_effect.settings["request_timeout"] = Setting(
            request.name, request.value, f"{request.text} (bounds receiving the request, not the response)",
            request.where)
    common = found.hcm.mapping("common_http_protocol_options")
    setting("max_stream_duration", common, "max_stream_duration", default("max_stream_duration"),
            shown_default("max_stream_duration", "max_stream_duration"))
    route_max = action.mapping("max_stream_duration")
    if "max_stream_duration" in route_max:
        setting("route max_stream_duration", route_max, "max_stream_duration", None, "")
    _in_effect(in_effect, route_max)
    filters = found.hcm.items_list("http_filters")
    in_effect.settings["http_filters"] = Setting(
        "http_filters", filters, ", ".join(str(f.get("name")) for f in filters) or "(none)",
        f"{shown}:{found.hcm.line('http_filters')}" if "http_filters" in found.hcm else DEFAULT)
    thresholds = next(iter(found.cluster.mapping("circuit_breakers").items_list("thresholds")), None)
    for key in BREAKERS:
        if isinstance(thresholds, YamlMap) and key in thresholds:
            in_effect.settings[key] = Setting(key, int(thresholds[key]), f"{key}: {thresholds[key]}",
                                            f"{shown}:{thresholds.line(key)}")
        else:
            in_effect.settings[key] = Setting(key, int(table[key]), f"{key}: {table[key]} (default)", DEFAULT)
    if "cluster_type" in found.cluster:
        extension = found.cluster.mapping("cluster_type").get("name", "?")
        in_effect.settings["cluster type"] = Setting("cluster type", extension, f"cluster_type: {extension}",
                                                   f"{shown}:{found.cluster.line('cluster_type')}")
    else:
        in_effect.settings["cluster type"] = Setting(
            "cluster type", found.cluster.get("type", "STATIC"), f"type: {found.cluster.get('type', 'STATIC')}",
            f"{shown}:{found.cluster.line('type')}" if "type" in found.cluster else DEFAULT)
    return in_effect


def _in_effect(in_effect: InEffect, route_max: YamlMap) -> None:
    """The one idle timeout and the one stream-duration cap the route runs under.

    Envoy: a route's idle_timeout overrides the connection manager's stream_idle_timeout (0
    disables it for the route); a route's max_stream_duration.max_stream_duration overrides
    common_http_protocol_options.max_stream_duration (0 disables it for the route).
    grpc_timeout_header_max applies only to requests carrying grpc-timeout, which verify's does not."""
    values = in_effect.settings
    route_idle, hcm_idle = values["route idle_timeout"], values["stream_idle_timeout"]
    values["idle timeout"] = (_on_route("idle timeout", route_idle, hcm_idle) if not route_idle.is_default else
                                _off(Setting("idle timeout", hcm_idle.value or None, hcm_idle.text, hcm_idle.where),
                                     " (no route idle_timeout)"))
    route_cap, hcm_cap = values.get("route max_stream_duration"), values["max_stream_duration"]
    values["stream duration"] = (_on_route("stream duration", route_cap, hcm_cap) if route_cap is not None else
                                   Setting("stream duration", hcm_cap.value or None, hcm_cap.text, hcm_cap.where))
    for key in ("grpc_timeout_header_max", "grpc_timeout_header_offset"):
        if key in route_max:
            in_effect.notes.append(f"max_stream_duration.{key} applies only to requests carrying a grpc-timeout "
                                   "header; verify's request carries none, so it does not bound this stream")


def _on_route(name: str, route: Setting, hcm: Setting) -> Setting:
    """The route's own value, which overrides the connection manager's (0 disables it there)."""
    return _off(Setting(name, route.value or None, f"{route.text} on the route", route.where),
                f" (overrides {hcm.text})")


def _off(setting: Setting, said: str) -> Setting:
    """`said` after the text, and " (disabled)" before it where the value is 0 (no limit)."""
    disabled = " (disabled)" if not setting.value else ""
    return Setting(setting.name, setting.value, f"{setting.text}{disabled}{said}", setting.where)
