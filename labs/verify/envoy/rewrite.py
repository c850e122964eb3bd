"""Rewrite a user's Envoy bootstrap to run here, in front of the lab's server (labs.verify.rewrite),
in memory: one handler per key (`HANDLERS`, by section: the bootstrap's own keys, then
`static_resources.`, `listener.`, `filter_chain.`, `hcm.` for an HTTP connection manager,
`cluster.`), and the keys kept as written declared (`KEPT`): the streaming settings verify measures.

Edits are made in the user's YAML text at the exact position of each value: listener and admin
addresses become free loopback ports, every cluster becomes STATIC with its endpoints at the lab's
server whatever its discovery type (clusters.py: DNS, ORIGINAL_DST, EDS, cluster_type extensions),
a listener's TLS is kept with a certificate made for the run (tls.py: the chosen listener is
measured over TLS), TLS towards the upstream and health checks go, HTTP/2 towards the upstream
becomes HTTP/1.1 (the lab's server speaks plain HTTP/1.1), filters calling outside services
(ext_authz, ext_proc) are left out, access-log files move into the run's folder, and xDS and stats
sinks (other hosts) are dropped.
"""
from __future__ import annotations

import re
import urllib.request
from typing import Any, Iterator

import yaml

from labs.findings import UnusableInput
from labs.verify.edits import MARK
from labs.verify.envoy import clusters, tls
from labs.verify.envoy.config import HCM_TYPE, EnvoyConfig, YamlMap, typed
from labs.verify.envoy.rewriting import Handler, Run
from labs.verify.envoy.routes import EnvoyRoute
from labs.verify.plan import RunPlan, reason
from labs.verify.rewrite import Rewritten
from labs.verify.yamledit import Edits, set_address, walk
from server.processes import free_port

def rewrite(config: EnvoyConfig, route: EnvoyRoute, plan: RunPlan) -> Rewritten:
    folder, admin_port = plan.folder, free_port()
    result = Rewritten("envoy", folder, folder / "conf" / "envoy.yaml", listen_port=0, admin_port=admin_port)
    result.contacted = lambda: contacted(admin_port)
    run = Run(HANDLERS, config, plan, route, result, Edits(config.text),
              {c.get("name") for c in config.static.items_list("clusters") if isinstance(c, YamlMap)}, admin_port)
    run.visit("", config.data)
    if not run.admin_kept:
        run.edits.top([f"# {MARK}: an admin endpoint on loopback, for readiness and upstream stats",
                       f"admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {admin_port}}}}}}}"])
    result.files[str(config.path)] = (config.text, run.edits.apply(), result.main)
    return result


def directives(config: EnvoyConfig) -> Iterator[str]:
    """Every key the handlers are looked up by, spelt as `HANDLERS` and `KEPT` spell them."""
    yield from config.data
    static = config.static
    yield from (f"static_resources.{key}" for key in static)
    for listener in static.items_list("listeners"):
        yield from (f"listener.{key}" for key in listener)
        for chain in listener.items_list("filter_chains"):
            yield from (f"filter_chain.{key}" for key in chain)
            for item in chain.items_list("filters"):
                if HCM_TYPE in typed(item):
                    yield from (f"hcm.{key}" for key in item.mapping("typed_config") if key != "@type")
    for cluster in static.items_list("clusters"):
        yield from (f"cluster.{key}" for key in cluster)


def _admin(run: Run, data: YamlMap, key: str) -> None:
    admin = data.mapping(key)
    socket = admin.mapping("address").mapping("socket_address")
    if not socket:  # on a Unix socket (the fixed config's), or with no address at all
        run.edits.comment(data, key)
        run.note(f"admin replaced: {reason('admin-own')}")
        return
    run.admin_kept = True
    set_address(run.edits, socket, run.admin_port)
    for option in ("access_log_path", "profile_path"):
        if option in admin:
            run.edits.scalar(admin.value_nodes[option], str(run.plan.folder / f"admin-{option}"))
    if "allow_paths" in admin:
        # The run's admin is the lab's own, on a free loopback port: it reads /clusters to
        # prove that only the lab's server was used, which a read-only list may not serve.
        run.edits.comment(admin, "allow_paths")
        run.note(f"admin allow_paths dropped: {reason('admin-paths')}")


def _dropped(why: str) -> Handler:
    def handler(run: Run, data: YamlMap, key: str) -> None:
        run.edits.comment(data, key)
        run.note(f"{key} dropped: {reason(why)}")
    return handler


def _static(run: Run, data: YamlMap, key: str) -> None:
    run.visit("static_resources", data.mapping(key))


def _listeners(run: Run, static: YamlMap, key: str) -> None:
    for listener in static.items_list(key):
        run.listener, run.port = listener, free_port()
        if listener is run.route.listener and not run.result.listen_port:
            run.result.listen_port = run.port
        if not listener.mapping("address").mapping("socket_address"):
            raise UnusableInput("a listener without a socket_address (pipe?) cannot be measured",
                                file=str(run.config.path), line=listener.line())
        run.visit("listener", listener)


def _listen_address(run: Run, listener: YamlMap, key: str) -> None:
    set_address(run.edits, listener.mapping(key).mapping("socket_address"), run.port)


def _filter_chains(run: Run, listener: YamlMap, key: str) -> None:
    for index, chain in enumerate(listener.items_list(key)):
        run.chain_index = index
        run.visit("filter_chain", chain)


def _chain_match(run: Run, chain: YamlMap, key: str) -> None:
    run.edits.comment(chain, key)
    run.note(f"filter_chain_match dropped: {reason('no-sni')}")


def _transport_socket(run: Run, chain: YamlMap, key: str) -> None:
    socket = chain.mapping(key)
    name = run.listener.get("name") if run.listener is not None else "?"
    if socket and tls.is_downstream_tls(socket):
        tls.keep(run.edits, socket, run.pair, f"listener {name}", run.note)
        run.note(reason("tls-kept"))
        if run.listener is run.route.listener and run.chain_index == _route_chain(run):
            run.result.tls = True
    else:
        run.edits.comment(chain, key)
        run.note(f"listener {name}: a transport socket other than TLS ({socket.get('name', '?')}) is off here: "
                 "the listener speaks plain HTTP")


def _route_chain(run: Run) -> int | None:
    chains = run.route.listener.items_list("filter_chains")
    return next((index for index, chain in enumerate(chains) if chain is run.route.chain), None)


def _network_filters(run: Run, chain: YamlMap, key: str) -> None:
    """An HTTP connection manager's keys by the table; another network filter that calls an
    outside service is left out, and any file access log of the rest writes into the run's folder."""
    for index, item in enumerate(chain.items_list(key)):
        if HCM_TYPE in typed(item):
            run.visit("hcm", item.mapping("typed_config"))
        elif clusters.outside(item) and isinstance(item, YamlMap):
            clusters.leave_out(run, chain.get(key), index, item)
        else:
            _logs_into_folder(run, item)


def _codec(run: Run, hcm: YamlMap, key: str) -> None:
    if hcm.get(key) == "HTTP2":  # AUTO still speaks HTTP/2 to a client that opens with it
        run.edits.scalar(hcm.value_nodes[key], "AUTO")


def _access_log(run: Run, hcm: YamlMap, key: str) -> None:
    _logs_into_folder(run, hcm[key])


def _logs_into_folder(run: Run, node: Any) -> None:
    for mapping in walk(node):
        # A file access logger's `path` (a route's `match.path` looks the same, so check the type).
        if "FileAccessLog" in str(mapping.get("@type", "")) and isinstance(mapping.get("path"), str):
            run.edits.scalar(mapping.value_nodes["path"], str(run.plan.folder / "access.log"))


def _http_filters(run: Run, hcm: YamlMap, key: str) -> None:
    """ext_authz / ext_proc (their services are not here) and dynamic_forward_proxy (its DNS cache
    has no user once every cluster is STATIC) do not run; the rules still read them."""
    clusters.leave_out_outside(run, hcm.get(key), hcm.items_list(key))
    for index, item in enumerate(hcm.items_list(key)):
        if not clusters.outside(item) and clusters.DFP in clusters.label(item):
            run.edits.drop_item(hcm[key], index)
            run.note(f"the {item.get('name')} filter is left out: its DNS cache has no user once its clusters are "
                     "STATIC at the lab's server")


def _secrets(run: Run, static: YamlMap, key: str) -> None:
    kinds = {name for secret in static.items_list(key) if isinstance(secret, YamlMap) for name in secret
             if name != "name"}
    if kinds and kinds <= {"tls_certificate", "validation_context", "session_ticket_keys"}:
        run.edits.comment(static, key)
        run.note(reason("tls-secrets"))


def _clusters(run: Run, static: YamlMap, key: str) -> None:
    for cluster in static.items_list(key):
        if isinstance(cluster, YamlMap):
            run.visit("cluster", cluster)


HANDLERS: dict[str, Handler] = {
    "admin": _admin, "static_resources": _static,
    "dynamic_resources": _dropped("xds"), "stats_sinks": _dropped("stats-sinks"),
    "tracing": _dropped("tracers"), "cluster_manager": _dropped("load-reports"),
    "static_resources.listeners": _listeners, "static_resources.clusters": _clusters,
    "static_resources.secrets": _secrets,
    "listener.address": _listen_address, "listener.additional_addresses": clusters.drop,
    "listener.filter_chains": _filter_chains,
    "filter_chain.filter_chain_match": _chain_match, "filter_chain.transport_socket": _transport_socket,
    "filter_chain.filters": _network_filters,
    "hcm.codec_type": _codec, "hcm.access_log": _access_log, "hcm.http_filters": _http_filters,
    **clusters.HANDLERS,
}
# Kept as written: what the run measures (timeouts, buffers, routes, filters' settings) and what
# changes nothing it contacts.
KEPT = frozenset({
    "node", "overload_manager", "layered_runtime", "stats_config", "stats_flush_interval", "watchdog",
    "watchdogs", "bootstrap_extensions", "default_regex_engine", "fatal_actions", "header_prefix",
    "listener.name", "listener.per_connection_buffer_limit_bytes", "listener.listener_filters",
    "listener.socket_options", "listener.connection_balance_config", "listener.enable_reuse_port",
    "listener.traffic_direction", "listener.tcp_backlog_size", "listener.bind_to_port",
    "filter_chain.name",
    "hcm.stat_prefix", "hcm.route_config", "hcm.stream_idle_timeout", "hcm.request_timeout",
    "hcm.request_headers_timeout", "hcm.common_http_protocol_options", "hcm.http_protocol_options",
    "hcm.http2_protocol_options", "hcm.use_remote_address", "hcm.xff_num_trusted_hops", "hcm.normalize_path",
    "hcm.merge_slashes", "hcm.path_with_escaped_slashes_action", "hcm.server_name",
    "hcm.server_header_transformation", "hcm.max_request_headers_kb", "hcm.upgrade_configs",
    "hcm.delayed_close_timeout", "hcm.drain_timeout", "hcm.generate_request_id", "hcm.stream_error_on_invalid_http_message",
    "hcm.preserve_external_request_id", "hcm.internal_address_config", "hcm.strip_any_host_port",
    "hcm.local_reply_config",
    "cluster.connect_timeout", "cluster.circuit_breakers", "cluster.per_connection_buffer_limit_bytes",
    "cluster.common_lb_config", "cluster.upstream_connection_options", "cluster.outlier_detection",
    "cluster.common_http_protocol_options", "cluster.http_protocol_options", "cluster.close_connections_on_host_health_failure",
})


def addresses(text: str) -> list[tuple[str, str]]:
    """Every socket address in the rewritten YAML, and any cluster that would resolve names."""
    data = yaml.safe_load(text)
    found: list[tuple[str, str]] = []

    def visit(node: Any, trail: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("socket_address"), dict):
                found.append((trail, str(node["socket_address"].get("address"))))
            if node.get("type") in ("STRICT_DNS", "LOGICAL_DNS", "ORIGINAL_DST", "EDS") or "cluster_type" in node:
                found.append((f"{trail} (cluster type {node.get('type') or 'cluster_type'})", str(node.get("name"))))
            for key, value in node.items():
                visit(value, f"{trail}.{key}" if trail else str(key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                visit(item, f"{trail}[{index}]")
    visit(data, "")
    return found


def contacted(admin_port: int | None) -> set[str]:
    """Every host of /clusters that Envoy opened a connection to (`cluster::host:port::cx_total::N`)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/clusters", timeout=5) as answer:
            text = answer.read().decode(errors="replace")
    except OSError:
        return set()
    return {m[1] for m in re.finditer(r"(?m)^[^:\n]+::([^:\n]+:\d+)::cx_total::(\d+)$", text) if int(m[2]) > 0}
