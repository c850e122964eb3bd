"""Every cluster of a user's Envoy bootstrap pointed at the lab's server, one handler per cluster
key (rewrite.py's table), and the filters whose outside services do not run here left out.

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
from typing import Any

from labs.verify.envoy.config import YamlMap, typed
from labs.verify.envoy.rewriting import Handler, Run
from labs.verify.plan import reason
from labs.verify.yamledit import set_address, walk

DNS_KEYS = ("dns_lookup_family", "dns_resolvers", "typed_dns_resolver_config", "dns_refresh_rate",
            "respect_dns_ttl", "dns_resolution_config", "use_tcp_for_dns_lookups", "dns_failure_refresh_rate",
            "dns_jitter")
# Settings that belong to the cluster's former discovery type and that STATIC rejects or ignores.
TYPE_KEYS = ("eds_cluster_config", "original_dst_lb_config")
DISCOVERED = ("STRICT_DNS", "LOGICAL_DNS", "ORIGINAL_DST", "EDS")
OUTSIDE_FILTERS = ("ext_authz", "ext_proc")
DFP = "dynamic_forward_proxy"


def _lab_endpoints(run: Run, cluster: YamlMap) -> list[str]:
    """The load_assignment to add where the cluster names no endpoint of its own (none: it does)."""
    if cluster.mapping("load_assignment").items_list("endpoints"):
        return []
    return [f"load_assignment: {{cluster_name: {json.dumps(str(cluster.get('name')))}, endpoints: [{{lb_endpoints: "
            f"[{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {run.plan.lab_port}}}}}}}}}]}}]}}"]


def cluster_type(run: Run, cluster: YamlMap, key: str) -> None:
    extension = cluster.mapping("cluster_type").get("name", "?")
    run.edits.replace_pair(cluster, key, ["type: STATIC", *_lab_endpoints(run, cluster)])
    run.note(f"cluster {cluster.get('name')}: cluster_type {extension} became a STATIC cluster at the lab's server")


def discovery_type(run: Run, cluster: YamlMap, key: str) -> None:
    kind, name, add = cluster.get("type", "STATIC"), cluster.get("name"), _lab_endpoints(run, cluster)
    if "cluster_type" in cluster or (kind not in DISCOVERED and not add):
        return
    run.edits.replace_pair(cluster, key, ["type: STATIC", *add])
    if kind == "EDS" and add:
        run.note(f"cluster {name}: its endpoints come from xDS (EDS); here it is a STATIC cluster at the lab's server")
    elif kind == "ORIGINAL_DST":
        run.note(f"cluster {name}: ORIGINAL_DST (the connection's own destination) became a STATIC cluster at "
                 "the lab's server")


def name(run: Run, cluster: YamlMap, key: str) -> None:
    """A cluster with neither type nor endpoints (STATIC by default): the lab's endpoints beside its name."""
    add = _lab_endpoints(run, cluster)
    if add and "cluster_type" not in cluster and "type" not in cluster:
        run.edits.replace_pair(cluster, key, [f"name: {json.dumps(str(cluster.get('name')))}", *add])


def load_assignment(run: Run, cluster: YamlMap, key: str) -> None:
    if _lab_endpoints(run, cluster):  # no endpoint of its own: the lab's are added beside the type
        run.edits.comment(cluster, key)
    sockets = [m["socket_address"] for m in walk(cluster.mapping(key)) if isinstance(m.get("socket_address"), YamlMap)]
    for index, socket in enumerate(sockets):  # endpoint k: replica k under `verify --mcp` (RunPlan)
        set_address(run.edits, socket, run.plan.upstream_port(index))


def drop(run: Run, owner: YamlMap, key: str) -> None:
    """A key that belongs to what is no longer here (DNS, the former discovery type): gone, unsaid."""
    run.edits.comment(owner, key)


def lb_policy(run: Run, cluster: YamlMap, key: str) -> None:
    if str(cluster.get(key, "")) == "CLUSTER_PROVIDED":  # the discovery type that provided it is gone
        run.edits.comment(cluster, key)


def upstream_tls(run: Run, cluster: YamlMap, key: str) -> None:
    run.edits.comment(cluster, key)
    run.note(f"cluster {cluster.get('name')}: {key} dropped ({reason('upstream-tls')})")


def health_checks(run: Run, cluster: YamlMap, key: str) -> None:
    run.edits.comment(cluster, key)
    run.note(f"cluster {cluster.get('name')}: {reason('health-check')}")


def http2_options(run: Run, cluster: YamlMap, key: str) -> None:
    """The cluster's own HTTP/2 options (deprecated there): HTTP/1.1 towards the lab's server."""
    run.edits.pair(cluster, key, "http_protocol_options: {}")
    run.note(_http1_said(cluster))


def protocol_options(run: Run, cluster: YamlMap, key: str) -> None:
    """HttpProtocolOptions: HTTP/1.1 explicitly (ALPN's choice, the client's protocol or HTTP/2
    cannot work with TLS off), and the upstream filters calling outside services left out."""
    replaced: list[Any] = []
    for mapping in walk(cluster[key]):
        for option in ("auto_config", "use_downstream_protocol_config"):
            if option in mapping:
                options = mapping.mapping(option).get("http_protocol_options")
                kept = json.dumps(options) if isinstance(options, dict) else "{}"
                run.edits.pair(mapping, option, f"explicit_http_config: {{http_protocol_options: {kept}}}")
                replaced.extend(walk(mapping[option]))
                run.note(_http1_said(cluster))
    for mapping in walk(cluster[key]):
        if "http2_protocol_options" in mapping and not any(m is mapping for m in replaced):
            run.edits.pair(mapping, "http2_protocol_options", "http_protocol_options: {}")
            run.note(_http1_said(cluster))
    for options in cluster.mapping(key).values():
        if isinstance(options, YamlMap):
            leave_out_outside(run, options.get("http_filters"), options.items_list("http_filters"))


def _http1_said(cluster: YamlMap) -> str:
    return f"cluster {cluster.get('name')}: HTTP/2 towards the upstream became HTTP/1.1 ({reason('upstream-http1')})"


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


def label(item: Any) -> str:
    return f"{item.get('name', '')} {typed(item)}" if isinstance(item, YamlMap) else ""


def outside(item: Any) -> bool:
    """ext_authz / ext_proc: a filter that calls a service of the user's, which is not here."""
    return any(name in label(item) for name in OUTSIDE_FILTERS)


def leave_out_outside(run: Run, seq: Any, items: list[Any]) -> None:
    """Leave the filters of a list that call outside services out of the run, each said."""
    for index, item in enumerate(items):
        if outside(item) and isinstance(item, YamlMap):
            leave_out(run, seq, index, item)


def leave_out(run: Run, seq: Any, index: int, item: YamlMap) -> None:
    service, other = _service_cluster(item.mapping("typed_config"))
    if service is None:
        where = f"it calls {other}, another host"
    elif service in run.clusters:
        where = f"its service cluster {service} would be the lab's server here, which is no such service"
    else:
        where = f"its service cluster {service} is not in the config"
    run.edits.drop_item(seq, index)
    run.note(f"the {item.get('name')} filter is left out of the run ({where}); {reason('judged-statically')}")


HANDLERS: dict[str, Handler] = {
    "cluster.name": name, "cluster.type": discovery_type, "cluster.cluster_type": cluster_type,
    "cluster.load_assignment": load_assignment, "cluster.lb_policy": lb_policy,
    **{f"cluster.{key}": drop for key in (*DNS_KEYS, *TYPE_KEYS)},
    "cluster.transport_socket": upstream_tls, "cluster.transport_socket_matches": upstream_tls,
    "cluster.health_checks": health_checks, "cluster.http2_protocol_options": http2_options,
    "cluster.typed_extension_protocol_options": protocol_options,
}
