"""Rewrite a user's Envoy bootstrap to run here, in front of the lab's server (labs.verify.rewrite).

Edits are made in the user's YAML text at the exact position of each value: listener and admin
addresses become free loopback ports, every cluster becomes STATIC with its endpoints at the lab's
server (STRICT_DNS / LOGICAL_DNS and their DNS settings go), TLS transport sockets and health
checks go, HTTP/2 towards the upstream becomes HTTP/1.1 (the lab's server speaks HTTP/1.1),
access-log files move into the run's folder, and xDS and stats sinks (other hosts) are dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from labs.findings import UnusableInput
from labs.verify.edits import MARK
from labs.verify.envoy.config import YamlList, YamlMap, load
from labs.verify.rewrite import Rewritten
from server.processes import free_port

DNS_KEYS = ("dns_lookup_family", "dns_resolvers", "typed_dns_resolver_config", "dns_refresh_rate",
            "respect_dns_ttl", "dns_resolution_config", "use_tcp_for_dns_lookups", "dns_failure_refresh_rate")
DROPPED_TOP = {"dynamic_resources": "xDS servers are other hosts", "stats_sinks": "stats sinks are other hosts",
               "tracing": "tracers are other hosts", "cluster_manager": "load reports go to other hosts"}


class _Edits:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int, str]] = []

    def scalar(self, node: yaml.Node, new: str) -> None:
        self.spans.append((node.start_mark.index, node.end_mark.index, new))

    def pair(self, owner: YamlMap, key: str, new: str) -> None:
        start = owner.key_nodes[key].start_mark.index
        end = owner.value_nodes[key].end_mark.index
        while end > start and self.text[end - 1].isspace():
            end -= 1
        self.spans.append((start, end, new))

    def comment(self, owner: YamlMap, key: str) -> None:
        """Drop `key: value` (up to the next key, so a list item's `- ` stays with that key)."""
        keys = list(owner.key_nodes)
        start = owner.key_nodes[key].start_mark.index
        following = keys[keys.index(key) + 1:]
        if following:
            end = owner.key_nodes[following[0]].start_mark.index
        else:
            end = owner.value_nodes[key].end_mark.index
            while end > start and self.text[end - 1].isspace():
                end -= 1
        self.spans.append((start, end, ""))

    def top(self, lines: list[str]) -> None:
        self.spans.append((0, 0, "".join(line + "\n" for line in lines)))

    def apply(self) -> str:
        text = self.text
        for start, end, new in sorted(self.spans, reverse=True):
            text = text[:start] + new + text[end:]
        return text


def rewrite(path: Path, listener_name: Any, lab_port: int, folder: Path) -> Rewritten:
    text, data = load(path)
    edits = _Edits(text)
    result = Rewritten("envoy", folder, folder / "conf" / "envoy.yaml", listen_port=0, admin_port=free_port())

    def note(message: str) -> None:
        if message not in result.notes:
            result.notes.append(message)

    admin = data.mapping("admin")
    socket = admin.mapping("address").mapping("socket_address")
    if socket:
        _address(edits, socket, result.admin_port)
        for key in ("access_log_path", "profile_path"):
            if key in admin:
                edits.scalar(admin.value_nodes[key], str(folder / f"admin-{key}"))
        if "allow_paths" in admin:
            # The run's admin is the lab's own, on a free loopback port: it reads /clusters to
            # prove that only the lab's server was used, which a read-only list may not serve.
            edits.comment(admin, "allow_paths")
            note("admin allow_paths dropped: this run reads /clusters on its own loopback admin")
    else:
        edits.top([f"# {MARK}: an admin endpoint on loopback, for readiness and upstream stats",
                   f"admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {result.admin_port}}}}}}}"])
    for key, why in DROPPED_TOP.items():
        if key in data:
            edits.comment(data, key)
            note(f"{key} dropped: {why}")
    static = data.mapping("static_resources")
    for listener in static.items_list("listeners"):
        port = free_port()
        if listener.get("name") == listener_name and not result.listen_port:
            result.listen_port = port
        socket = listener.mapping("address").mapping("socket_address")
        if not socket:
            raise UnusableInput("a listener without a socket_address (pipe?) cannot be measured",
                                file=str(path), line=listener.line())
        _address(edits, socket, port)
        if "additional_addresses" in listener:
            edits.comment(listener, "additional_addresses")
        for chain in listener.items_list("filter_chains"):
            for key in ("transport_socket", "filter_chain_match"):
                if key in chain:
                    edits.comment(chain, key)
                    note("TLS is off here: the lab speaks plain HTTP to the same listener")
            for mapping in _walk(chain):
                if mapping.get("codec_type") == "HTTP2":
                    edits.scalar(mapping.value_nodes["codec_type"], "AUTO")
                if _is_log_path(mapping):
                    edits.scalar(mapping.value_nodes["path"], str(folder / "access.log"))
    for cluster in static.items_list("clusters"):
        kind = cluster.get("type", "STATIC")
        if kind in ("STRICT_DNS", "LOGICAL_DNS"):
            edits.scalar(cluster.value_nodes["type"], "STATIC")
            for key in DNS_KEYS:
                if key in cluster:
                    edits.comment(cluster, key)
        elif kind not in ("STATIC",) or "cluster_type" in cluster:
            raise UnusableInput(f"cluster {cluster.get('name')!r} of type {kind} cannot be pointed at the lab's "
                                "server (STATIC, STRICT_DNS and LOGICAL_DNS can)", file=str(path),
                                line=cluster.line())
        for mapping in _walk(cluster.mapping("load_assignment")):
            if "socket_address" in mapping and isinstance(mapping["socket_address"], YamlMap):
                _address(edits, mapping["socket_address"], lab_port)
        for key, why in (("transport_socket", "the lab's server speaks plain HTTP"),
                         ("health_checks", "health checks would probe the lab's server")):
            if key in cluster:
                edits.comment(cluster, key)
                note(f"cluster {cluster.get('name')}: {key} dropped ({why})")
        for mapping in _walk(cluster):
            if "http2_protocol_options" in mapping:
                edits.pair(mapping, "http2_protocol_options", "http_protocol_options: {}")
                note(f"cluster {cluster.get('name')}: HTTP/2 towards the upstream became HTTP/1.1 "
                     "(the lab's server speaks HTTP/1.1)")
    new = edits.apply()
    result.files[str(path)] = (text, new, result.main)
    return result


def _address(edits: _Edits, socket: YamlMap, port: int) -> None:
    edits.scalar(socket.value_nodes["address"], "127.0.0.1")
    if "port_value" in socket:
        edits.scalar(socket.value_nodes["port_value"], str(port))
    if "resolver_name" in socket:
        edits.comment(socket, "resolver_name")


def _is_log_path(mapping: YamlMap) -> bool:
    """A file access logger's `path` (a route's `match.path` looks the same, so check the type)."""
    return "FileAccessLog" in str(mapping.get("@type", "")) and isinstance(mapping.get("path"), str)


def _walk(node: Any) -> Iterator[YamlMap]:
    if isinstance(node, YamlMap):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, (list, YamlList)):
        for item in node:
            yield from _walk(item)


def addresses(text: str) -> list[tuple[str, str]]:
    """Every socket address in the rewritten YAML, and any cluster that would resolve names."""
    data = yaml.safe_load(text)
    found: list[tuple[str, str]] = []

    def visit(node: Any, trail: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("socket_address"), dict):
                found.append((trail, str(node["socket_address"].get("address"))))
            if node.get("type") in ("STRICT_DNS", "LOGICAL_DNS", "ORIGINAL_DST"):
                found.append((f"{trail} (cluster type {node['type']})", str(node.get("name"))))
            for key, value in node.items():
                visit(value, f"{trail}.{key}" if trail else str(key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                visit(item, f"{trail}[{index}]")
    visit(data, "")
    return found
