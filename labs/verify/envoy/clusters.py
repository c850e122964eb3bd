"""Every cluster of a user's Envoy bootstrap pointed at the lab's server, and the HTTP filters whose
outside services do not run here left out of the run (rewrite.py calls both).

A cluster of any discovery type becomes STATIC with its endpoints at the lab: STRICT_DNS and
LOGICAL_DNS lose their DNS settings; ORIGINAL_DST, EDS without a static load_assignment and
`cluster_type` extensions (dynamic_forward_proxy...) get a load_assignment naming the lab (their
lb_policy CLUSTER_PROVIDED and type-specific settings go). TLS towards the upstream and health
checks go; HTTP/2 (or ALPN's choice) towards the upstream becomes HTTP/1.1, as the lab's server
speaks HTTP/1.1. ext_authz and ext_proc filters call a service that is not here: they are left
out of the run, and their settings are still judged statically (rules.py reads the user's file).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from labs.verify.envoy.config import YamlMap, typed
from labs.verify.envoy.read import HCM_TYPE
from labs.verify.yamledit import Edits, set_address, walk

DNS_KEYS = ("dns_lookup_family", "dns_resolvers", "typed_dns_resolver_config", "dns_refresh_rate",
            "respect_dns_ttl", "dns_resolution_config", "use_tcp_for_dns_lookups", "dns_failure_refresh_rate",
            "dns_jitter")
# Settings that belong to the cluster's former discovery type and that STATIC rejects or ignores.
TYPE_KEYS = ("eds_cluster_config", "original_dst_lb_config")
OUTSIDE_FILTERS = ("ext_authz", "ext_proc")
DFP = "dynamic_forward_proxy"
Note = Callable[[str], None]


def _load_assignment(name: Any, lab_port: int) -> str:
    return (f"load_assignment: {{cluster_name: {json.dumps(str(name))}, endpoints: [{{lb_endpoints: [{{endpoint: "
            f"{{address: {{socket_address: {{address: 127.0.0.1, port_value: {lab_port}}}}}}}}}]}}]}}")


def point_at_lab(edits: Edits, static: YamlMap, path: Path, lab_port: int, note: Note) -> None:
    for cluster in static.items_list("clusters"):
        if isinstance(cluster, YamlMap):
            _cluster(edits, cluster, lab_port, note)


def _cluster(edits: Edits, cluster: YamlMap, lab_port: int, note: Note) -> None:
    name = cluster.get("name")
    kind = cluster.get("type", "STATIC")
    has_endpoints = bool(cluster.mapping("load_assignment").items_list("endpoints"))
    add = [] if has_endpoints else [_load_assignment(name, lab_port)]
    if has_endpoints is False and "load_assignment" in cluster:
        edits.comment(cluster, "load_assignment")
    if "cluster_type" in cluster:
        extension = cluster.mapping("cluster_type").get("name", "?")
        edits.replace_pair(cluster, "cluster_type", ["type: STATIC", *add])
        note(f"cluster {name}: cluster_type {extension} became a STATIC cluster at the lab's server")
    elif kind in ("STRICT_DNS", "LOGICAL_DNS", "ORIGINAL_DST", "EDS") or add:
        if "type" in cluster:
            edits.replace_pair(cluster, "type", ["type: STATIC", *add])
        else:
            edits.replace_pair(cluster, "name", [f"name: {json.dumps(str(name))}", *add])
        if kind == "EDS" and add:
            note(f"cluster {name}: its endpoints come from xDS (EDS); here it is a STATIC cluster at the lab's "
                 "server")
        elif kind == "ORIGINAL_DST":
            note(f"cluster {name}: ORIGINAL_DST (the connection's own destination) became a STATIC cluster at "
                 "the lab's server")
    for key in (*DNS_KEYS, *TYPE_KEYS):
        if key in cluster:
            edits.comment(cluster, key)
    if str(cluster.get("lb_policy", "")) == "CLUSTER_PROVIDED":
        edits.comment(cluster, "lb_policy")
    for mapping in walk(cluster.mapping("load_assignment")):
        if "socket_address" in mapping and isinstance(mapping["socket_address"], YamlMap):
            set_address(edits, mapping["socket_address"], lab_port)
    for key, why in (("transport_socket", "the lab's server speaks plain HTTP"),
                     ("transport_socket_matches", "the lab's server speaks plain HTTP"),
                     ("health_checks", "health checks would probe the lab's server")):
        if key in cluster:
            edits.comment(cluster, key)
            note(f"cluster {name}: {key} dropped ({why})")
    _http1(edits, cluster, note)


def _http1(edits: Edits, cluster: YamlMap, note: Note) -> None:
    said = (f"cluster {cluster.get('name')}: HTTP/2 towards the upstream became HTTP/1.1 "
            "(the lab's server speaks HTTP/1.1)")
    replaced: list[Any] = []
    for mapping in walk(cluster):
        for key in ("auto_config", "use_downstream_protocol_config"):
            if key in mapping:  # ALPN or the client's protocol: HTTP/1.1 explicitly, as TLS is off here
                options = mapping.mapping(key).get("http_protocol_options")
                kept = json.dumps(options) if isinstance(options, dict) else "{}"
                edits.pair(mapping, key, f"explicit_http_config: {{http_protocol_options: {kept}}}")
                replaced.extend(walk(mapping[key]))
                note(said)
    for mapping in walk(cluster):
        if "http2_protocol_options" in mapping and not any(m is mapping for m in replaced):
            edits.pair(mapping, "http2_protocol_options", "http_protocol_options: {}")
            note(said)


def _service_cluster(config: YamlMap) -> tuple[str | None, str]:
    """The cluster an ext_authz / ext_proc filter calls, or what else it names."""
    grpc = config.mapping("grpc_service")
    if grpc:
        if "envoy_grpc" in grpc:
            return str(grpc.mapping("envoy_grpc").get("cluster_name")), ""
        if "google_grpc" in grpc:
            return None, f"google_grpc {grpc.mapping('google_grpc').get('target_uri')}"
    http = config.mapping("http_service").mapping("server_uri")
    if http:
        return str(http.get("cluster")), ""
    return None, "no service"


def leave_out_filters(edits: Edits, static: YamlMap, note: Note) -> None:
    """ext_authz / ext_proc (their services are not here) and dynamic_forward_proxy (its DNS cache
    has no user once every cluster is STATIC) do not run; the rules still read them."""
    known = {c.get("name") for c in static.items_list("clusters") if isinstance(c, YamlMap)}
    for listener in static.items_list("listeners"):
        for chain in listener.items_list("filter_chains"):
            network = chain.get("filters")
            for index, item in enumerate(chain.items_list("filters")):
                if _outside(item) and not isinstance(item, str) and HCM_TYPE not in typed(item):
                    _leave_out(edits, network, index, item, known, note)
                if HCM_TYPE in typed(item):
                    http_filters = item.mapping("typed_config").get("http_filters")
                    for position, http in enumerate(item.mapping("typed_config").items_list("http_filters")):
                        if _outside(http):
                            _leave_out(edits, http_filters, position, http, known, note)
                        elif DFP in _label(http):
                            edits.drop_item(http_filters, position)
                            note(f"the {http.get('name')} filter is left out: its DNS cache has no user once its "
                                 "clusters are STATIC at the lab's server")
    # A cluster's own upstream filters (HttpProtocolOptions.http_filters) call services too.
    for cluster in static.items_list("clusters"):
        if not isinstance(cluster, YamlMap):
            continue
        for options in cluster.mapping("typed_extension_protocol_options").values():
            if not isinstance(options, YamlMap):
                continue
            upstream = options.get("http_filters")
            for position, http in enumerate(options.items_list("http_filters")):
                if _outside(http):
                    _leave_out(edits, upstream, position, http, known, note)


def _label(item: Any) -> str:
    return f"{item.get('name', '')} {typed(item)}" if isinstance(item, YamlMap) else ""


def _outside(item: Any) -> bool:
    return any(name in _label(item) for name in OUTSIDE_FILTERS)


def _leave_out(edits: Edits, seq: Any, index: int, item: YamlMap, known: set, note: Note) -> None:
    service, other = _service_cluster(item.mapping("typed_config"))
    if service is None:
        where = f"it calls {other}, another host"
    elif service in known:
        where = f"its service cluster {service} would be the lab's server here, which is no such service"
    else:
        where = f"its service cluster {service} is not in the config"
    edits.drop_item(seq, index)
    note(f"the {item.get('name')} filter is left out of the run ({where}); its settings are still judged "
         "statically")
