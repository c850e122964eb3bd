"""Rewrite a user's Envoy bootstrap to run here, in front of the lab's server (labs.verify.rewrite).

Edits are made in the user's YAML text at the exact position of each value: listener and admin
addresses become free loopback ports, every cluster becomes STATIC with its endpoints at the lab's
server whatever its discovery type (clusters.py: DNS, ORIGINAL_DST, EDS, cluster_type extensions),
a listener's TLS is kept with a certificate made for the run (tls.py: the chosen listener is
measured over TLS), TLS towards the upstream and health checks go, HTTP/2 towards the upstream
becomes HTTP/1.1 (the lab's server speaks plain HTTP/1.1), filters calling outside services (ext_authz, ext_proc) are left out,
access-log files move into the run's folder, and xDS and stats sinks (other hosts) are dropped.
"""
from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from labs.findings import UnusableInput
from labs.verify.edits import MARK
from labs.verify.envoy.config import YamlMap, load
from labs.verify.envoy import tls
from labs.verify.envoy.clusters import leave_out_filters, point_at_lab
from labs.verify.yamledit import Edits, set_address, walk
from labs.verify.rewrite import Rewritten
from labs.verify.tls import run_pair
from server.processes import free_port

DROPPED_TOP = {"dynamic_resources": "xDS servers are other hosts", "stats_sinks": "stats sinks are other hosts",
               "tracing": "tracers are other hosts", "cluster_manager": "load reports go to other hosts"}


def rewrite(path: Path, listener_name: Any, lab_port: int, folder: Path, chain_index: int | None = None) -> Rewritten:
    """`chain_index`: the chosen listener's filter chain that serves the route (its TLS decides
    whether the run is measured over TLS); None: any chain of that listener."""
    text, data = load(path)
    edits = Edits(text)
    result = Rewritten("envoy", folder, folder / "conf" / "envoy.yaml", listen_port=0, admin_port=free_port())
    result.contacted = lambda: contacted(result.admin_port)

    made: list[tuple[Path, Path]] = []

    def note(message: str) -> None:
        if message not in result.notes:
            result.notes.append(message)

    def pair() -> tuple[Path, Path]:
        if not made:
            made.append(run_pair(folder))
        return made[0]

    admin = data.mapping("admin")
    socket = admin.mapping("address").mapping("socket_address")
    if socket:
        set_address(edits, socket, result.admin_port)
        for key in ("access_log_path", "profile_path"):
            if key in admin:
                edits.scalar(admin.value_nodes[key], str(folder / f"admin-{key}"))
        if "allow_paths" in admin:
            # The run's admin is the lab's own, on a free loopback port: it reads /clusters to
            # prove that only the lab's server was used, which a read-only list may not serve.
            edits.comment(admin, "allow_paths")
            note("admin allow_paths dropped: this run reads /clusters on its own loopback admin")
    else:
        if "admin" in data:  # on a Unix socket (the fixed config's), or with no address at all
            edits.comment(data, "admin")
            note("admin replaced: this run reads /clusters on its own loopback admin, not your socket")
        edits.top([f"# {MARK}: an admin endpoint on loopback, for readiness and upstream stats",
                   f"admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {result.admin_port}}}}}}}"])
    for key, why in DROPPED_TOP.items():
        if key in data:
            edits.comment(data, key)
            note(f"{key} dropped: {why}")
    static = data.mapping("static_resources")
    for listener in static.items_list("listeners"):
        port = free_port()
        chosen = listener.get("name") == listener_name and not result.listen_port
        if chosen:
            result.listen_port = port
        socket = listener.mapping("address").mapping("socket_address")
        if not socket:
            raise UnusableInput("a listener without a socket_address (pipe?) cannot be measured",
                                file=str(path), line=listener.line())
        set_address(edits, socket, port)
        if "additional_addresses" in listener:
            edits.comment(listener, "additional_addresses")
        for index, chain in enumerate(listener.items_list("filter_chains")):
            if "filter_chain_match" in chain:
                edits.comment(chain, "filter_chain_match")
                note("filter_chain_match dropped: the lab's client connects to 127.0.0.1 (no SNI), so each "
                     "chain serves every connection")
            socket = chain.mapping("transport_socket")
            if socket and tls.is_downstream_tls(socket):
                tls.keep(edits, socket, pair, f"listener {listener.get('name')}", note)
                note(tls.TLS_KEPT)
                if chosen and chain_index in (None, index):
                    result.tls = True
            elif "transport_socket" in chain:
                edits.comment(chain, "transport_socket")
                note(f"listener {listener.get('name')}: a transport socket other than TLS "
                     f"({socket.get('name', '?')}) is off here: the listener speaks plain HTTP")
            for mapping in walk(chain):
                if mapping.get("codec_type") == "HTTP2":
                    edits.scalar(mapping.value_nodes["codec_type"], "AUTO")
                if _is_log_path(mapping):
                    edits.scalar(mapping.value_nodes["path"], str(folder / "access.log"))
    kinds = {key for secret in static.items_list("secrets") if isinstance(secret, YamlMap) for key in secret
             if key != "name"}
    if kinds and kinds <= {"tls_certificate", "validation_context", "session_ticket_keys"}:
        edits.comment(static, "secrets")
        note("static secrets dropped (files of your machine): the run's certificate serves the TLS listeners")
    point_at_lab(edits, static, path, lab_port, note)
    leave_out_filters(edits, static, note)
    new = edits.apply()
    result.files[str(path)] = (text, new, result.main)
    return result


def _is_log_path(mapping: YamlMap) -> bool:
    """A file access logger's `path` (a route's `match.path` looks the same, so check the type)."""
    return "FileAccessLog" in str(mapping.get("@type", "")) and isinstance(mapping.get("path"), str)


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
