"""Rewrite a Caddy config to run here, in front of the lab's server (see labs.verify.rewrite).

What runs is Caddy's JSON: a Caddyfile is adapted by Caddy itself (config.adapt) and the JSON is
rewritten, so the diff shown is of the JSON (the adapted Caddyfile before, the run's JSON after).
Every server listens on its own free loopback port with automatic HTTPS off and no TLS connection
policies (plain HTTP: the lab has no certificate for the user's names); every `reverse_proxy`
upstream (static `dial`s, dynamic A/SRV upstreams) becomes the lab's server and upstream TLS is
dropped; active health checks go; the admin endpoint is off; storage and file logs move into the
run folder, network log writers are discarded; apps other than `http` (tls, pki, layer4...) are
left out. A debug log of reverse_proxy (`error.log`) records every upstream contacted.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

from labs.verify import records
from labs.verify.caddy.config import CaddyConfig
from labs.verify.rewrite import Rewritten
from server.processes import free_port

MAIN = "caddy.json"
UPSTREAM_LOG = "error.log"  # reverse_proxy's debug lines: `"upstream": "127.0.0.1:8000"`


def contacted(folder: Path) -> set[str]:
    return records.addresses(r'"(?:upstream|dial)"\s*:\s*"' + records.ADDRESS, records.log_text(folder, UPSTREAM_LOG))


def rewrite(config: CaddyConfig, server_name: str, lab_port: int, folder: Path) -> Rewritten:
    data = copy.deepcopy(config.json)
    notes: list[str] = []
    lab = f"127.0.0.1:{lab_port}"
    data["admin"] = {"disabled": True}
    data["storage"] = {"module": "file_system", "root": str(folder / "storage")}
    apps = data.get("apps") or {}
    dropped = sorted(name for name in apps if name != "http")
    if dropped:
        notes.append(f"apps left out of the run: {', '.join(dropped)} (only http is measured)")
    http = apps.get("http") or {}
    for key in ("http_port", "https_port"):
        http.pop(key, None)
    data["apps"] = {"http": http}
    listen_port, tls = 0, False
    for name, server in (http.get("servers") or {}).items():
        port = free_port()
        if name == server_name:
            listen_port = port
        server["listen"] = [f"127.0.0.1:{port}"]
        tls = tls or bool(server.pop("tls_connection_policies", None)) or _automatic(server)
        server["automatic_https"] = {"disable": True}
        server.pop("strict_sni_host", None)
        server.pop("listener_wrappers", None)
    notes.append("automatic HTTPS is off here and every server listens on plain HTTP on 127.0.0.1"
                 + (" (the lab has no certificate for the config's names)" if tls else ""))
    upstream_tls = False
    for handler in _handlers(data):
        if handler.get("dynamic_upstreams"):
            handler.pop("dynamic_upstreams")
            notes.append("dynamic upstreams (A/SRV lookups) replaced by the lab's server")
        count = max(1, len(handler.get("upstreams") or []))
        handler["upstreams"] = [{"dial": lab} for _ in range(count)]
        transport = handler.get("transport") or {}
        if transport.pop("tls", None) is not None or transport.pop("tls_insecure_skip_verify", None):
            upstream_tls = True
        if transport.get("protocol") == "http" and transport.get("versions"):
            transport["versions"] = [v for v in transport["versions"] if v != "2"] or ["1.1"]
        if (handler.get("health_checks") or {}).pop("active", None) is not None:
            notes.append("active health checks off (the lab's server is the only upstream)")
    if upstream_tls:
        notes.append("upstream TLS is off here: the lab's server speaks plain HTTP")
    data["logging"] = _logging(data.get("logging") or {}, folder)
    text = json.dumps(data, indent=2) + "\n"
    main = folder / MAIN
    before = json.dumps(config.json, indent=2) + "\n" if config.caddyfile else config.text
    label = f"{config.shown} (as Caddy's JSON: caddy adapt)" if config.caddyfile else config.shown
    return Rewritten("caddy", folder, main, listen_port=listen_port,
                     files={str(config.file): (before, text, main)}, notes=list(dict.fromkeys(notes)),
                     labels={str(config.file): label}, contacted=lambda: contacted(folder))


def _automatic(server: dict[str, Any]) -> bool:
    return not (server.get("automatic_https") or {}).get("disable") and \
        any(a.endswith(":443") for a in server.get("listen") or [])


def _logging(logging: dict[str, Any], folder: Path) -> dict[str, Any]:
    logging = copy.deepcopy(logging)
    for log in (logging.get("logs") or {}).values():
        writer = log.get("writer") or {}
        if writer.get("output") == "file":
            writer["filename"] = str(folder / Path(writer.get("filename") or "access.log").name)
        elif writer.get("output") == "net":
            log["writer"] = {"output": "discard"}
    logging.setdefault("logs", {})["streamlab_upstreams"] = {
        "writer": {"output": "file", "filename": str(folder / UPSTREAM_LOG)},
        "encoder": {"format": "json"}, "level": "DEBUG", "include": ["http.handlers.reverse_proxy"]}
    return logging


def _handlers(node: Any) -> Iterator[dict[str, Any]]:
    """Every reverse_proxy handler anywhere in the config (routes, subroutes, error routes)."""
    if isinstance(node, dict):
        if node.get("handler") == "reverse_proxy":
            yield node
        for value in node.values():
            yield from _handlers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _handlers(value)


def addresses(data: Any, where: str = "") -> list[tuple[str, str]]:
    """(where, host) for every `dial` and `listen` address the JSON names."""
    out: list[tuple[str, str]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "dial" and isinstance(value, str):
                out.append((f"{where}.dial", _host(value)))
            elif key == "listen" and isinstance(value, list):
                out.extend((f"{where}.listen", _host(a)) for a in value)
            else:
                out.extend(addresses(value, f"{where}.{key}"))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out.extend(addresses(value, f"{where}[{index}]"))
    return out


def _host(address: str) -> str:
    address = address.split("/", 1)[-1] if "/" in address.split(":")[0] else address  # tcp/host:port
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host.strip("[]") or "0.0.0.0"
