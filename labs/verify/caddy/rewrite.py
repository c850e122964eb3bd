"""Rewrite a Caddy config to run here, in front of the lab's server (see labs.verify.rewrite).

What runs is Caddy's JSON: a Caddyfile is adapted by Caddy itself (config.adapt) and the JSON is
rewritten, so the diff shown is of the JSON (the adapted Caddyfile before, the run's JSON after).
Every server listens on its own free loopback port with automatic HTTPS off and no TLS connection
policies (plain HTTP: the lab has no certificate for the user's names); every `reverse_proxy`
upstream (static `dial`s, dynamic A/SRV upstreams) becomes the lab's server and upstream TLS is
dropped; active health checks go; the admin endpoint is off; storage and file logs move into the
run folder, network log writers are discarded; apps other than `http` (tls, pki, layer4...) are
left out. A debug log of reverse_proxy (`error.log`) records every upstream contacted.

The rewrite is a table (labs/verify/plan.py): `entries` walks the JSON's directives, named as
`HANDLERS` and `KEPT` spell them (`admin`, `http`, `apps.tls`, `server.listen`, `reverse_proxy.upstreams`,
`reverse_proxy.transport.tls`, a handler module's name: `encode`), and each handler changes its own.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from labs.verify import records
from labs.verify.caddy.config import CaddyConfig
from labs.verify.plan import RunPlan, handler_for, reason
from labs.verify.rewrite import Rewritten
from server.processes import free_port

MAIN = "caddy.json"
UPSTREAM_LOG = "error.log"  # reverse_proxy's debug lines: `"upstream": "127.0.0.1:8000"`


@dataclass
class _Run:
    """What the rewrite learns on its walk: the chosen route's listener, what it left out."""

    plan: RunPlan
    chosen: str  # the server of the chosen route
    server: str = ""  # the server being walked
    written: list[str] = field(default_factory=list)  # its listen addresses as the user wrote them
    listen_port: int = 0
    tls: bool = False
    upstream_tls: bool = False
    left_out: list[str] = field(default_factory=list)  # apps
    notes: list[str] = field(default_factory=list)

    @property
    def lab(self) -> str:
        return f"127.0.0.1:{self.plan.lab_port}"


def contacted(folder: Path) -> set[str]:
    return records.addresses(r'"(?:upstream|dial)"\s*:\s*"' + records.ADDRESS, records.log_text(folder, UPSTREAM_LOG))


def rewrite(config: CaddyConfig, server_name: str, plan: RunPlan) -> Rewritten:
    """The config as it runs here, in memory; `server_name`: the chosen route's server."""
    data = copy.deepcopy(config.json)
    for added in ("admin", "storage", "logging"):  # set whether the config has them or not
        data.setdefault(added, {})
    run = _Run(plan, server_name)
    for owner, key, name in entries(data):
        handler = handler_for(HANDLERS, name)
        if handler is not None and key in owner:
            handler(owner, key, run)
    notes = [f"apps left out of the run: {', '.join(sorted(run.left_out))} ({reason('caddy-apps')})"] \
        if run.left_out else []
    notes.append(reason("caddy-plain-http") + (f" ({reason('no-certificate')})" if run.tls else ""))
    notes += run.notes
    if run.upstream_tls:
        notes.append(f"upstream TLS is off here: {reason('upstream-tls')}")
    folder = plan.folder
    text = json.dumps(data, indent=2) + "\n"
    before = json.dumps(config.json, indent=2) + "\n" if config.caddyfile else config.text
    label = f"{config.shown} (as Caddy's JSON: caddy adapt)" if config.caddyfile else config.shown
    return Rewritten("caddy", folder, folder / MAIN, listen_port=run.listen_port,
                     files={str(config.file): (before, text, folder / MAIN)}, notes=list(dict.fromkeys(notes)),
                     labels={str(config.file): label}, contacted=lambda: contacted(folder))


def entries(data: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, str]]:
    """Every directive of Caddy's JSON, outermost first: (the object holding it, its key, its name).
    Lazy: a walk that changes a directive goes on into it as changed (an app left out is not entered)."""
    for key in list(data):
        if key != "apps":
            yield data, key, key
    apps = data.get("apps") or {}
    for app in list(apps):
        yield apps, app, "http" if app == "http" else f"apps.{app}"  # the one app measured, and the others
    http = apps.get("http") or {}
    for key in list(http):
        yield http, key, f"http.{key}"
    servers = http.get("servers") or {}
    for server_name in list(servers):
        yield servers, server_name, "server"
        server = servers[server_name]
        for key in list(server):
            yield server, key, f"server.{key}"
        for module in _modules(server):  # its routes, error routes, named routes
            yield module, "handler", module["handler"]
            if module["handler"] == "reverse_proxy":
                yield from ((module, key, f"reverse_proxy.{key}") for key in list(module) if key != "handler")
                transport = module.get("transport") or {}
                yield from ((transport, key, f"reverse_proxy.transport.{key}") for key in list(transport))


def _modules(node: Any) -> Iterator[dict[str, Any]]:
    """Every handler module under `node` (routes, subroutes, handle_response routes), outermost first."""
    if isinstance(node, dict):
        if isinstance(node.get("handler"), str):
            yield node
        for value in list(node.values()):
            yield from _modules(value)
    elif isinstance(node, list):
        for value in node:
            yield from _modules(value)


def _admin_off(data: dict[str, Any], key: str, run: _Run) -> None:
    data[key] = {"disabled": True}  # nothing reconfigures the run, and no port is taken


def _storage_in_run(data: dict[str, Any], key: str, run: _Run) -> None:
    data[key] = {"module": "file_system", "root": str(run.plan.folder / "storage")}


def _logging(data: dict[str, Any], key: str, run: _Run) -> None:
    """File logs into the run folder, network ones discarded, and the log of upstreams contacted."""
    logging = data[key] or {}
    for log in (logging.get("logs") or {}).values():
        writer = log.get("writer") or {}
        if writer.get("output") == "file":
            writer["filename"] = str(run.plan.folder / Path(writer.get("filename") or "access.log").name)
        elif writer.get("output") == "net":
            log["writer"] = {"output": "discard"}
    logging.setdefault("logs", {})["streamlab_upstreams"] = {
        "writer": {"output": "file", "filename": str(run.plan.folder / UPSTREAM_LOG)},
        "encoder": {"format": "json"}, "level": "DEBUG", "include": ["http.handlers.reverse_proxy"]}
    data[key] = logging


def _app_left_out(apps: dict[str, Any], key: str, run: _Run) -> None:
    apps.pop(key)
    run.left_out.append(key)


def _drop(owner: dict[str, Any], key: str, run: _Run) -> None:
    owner.pop(key)


def _server(servers: dict[str, Any], key: str, run: _Run) -> None:
    """A server: every one has a loopback listener and automatic HTTPS off, written or not."""
    run.server = key
    server = servers[key]
    run.written = list(server.get("listen") or [])
    server.setdefault("listen", [])
    server.setdefault("automatic_https", {})


def _listen(server: dict[str, Any], key: str, run: _Run) -> None:
    port = free_port()
    if run.server == run.chosen:
        run.listen_port = port
    server[key] = [f"127.0.0.1:{port}"]


def _tls_policies(server: dict[str, Any], key: str, run: _Run) -> None:
    run.tls = bool(server.pop(key)) or run.tls


def _automatic_https_off(server: dict[str, Any], key: str, run: _Run) -> None:
    automatic = not (server[key] or {}).get("disable") and any(a.endswith(":443") for a in run.written)
    run.tls = run.tls or automatic
    server[key] = {"disable": True}


def _reverse_proxy(module: dict[str, Any], key: str, run: _Run) -> None:
    module.setdefault("upstreams", [])  # every reverse_proxy's upstreams, dynamic ones too, are the lab's


def _upstreams(module: dict[str, Any], key: str, run: _Run) -> None:
    module[key] = [{"dial": f"127.0.0.1:{run.plan.upstream_port(index)}"}
                   for index in range(max(1, len(module[key] or [])))]


def _dynamic_upstreams(module: dict[str, Any], key: str, run: _Run) -> None:
    module.pop(key)
    run.notes.append(f"dynamic upstreams (A/SRV lookups) dropped: {reason('resolver')}")


def _health_checks(module: dict[str, Any], key: str, run: _Run) -> None:
    if (module[key] or {}).pop("active", None) is not None:
        run.notes.append(reason("health-check"))


def _upstream_tls(transport: dict[str, Any], key: str, run: _Run) -> None:
    transport.pop(key)
    run.upstream_tls = True


def _http_versions(transport: dict[str, Any], key: str, run: _Run) -> None:
    """HTTP/2 to the lab's server would need TLS (or h2c, which it does not speak)."""
    if transport.get("protocol") == "http" and transport[key]:
        transport[key] = [v for v in transport[key] if v != "2"] or ["1.1"]


Handler = Callable[[dict[str, Any], str, _Run], None]
HANDLERS: dict[str, Handler] = {
    "admin": _admin_off, "storage": _storage_in_run, "logging": _logging,
    "apps.*": _app_left_out,
    "http.http_port": _drop, "http.https_port": _drop,
    "server": _server, "server.listen": _listen, "server.tls_connection_policies": _tls_policies,
    "server.automatic_https": _automatic_https_off, "server.strict_sni_host": _drop,
    "server.listener_wrappers": _drop,
    "reverse_proxy": _reverse_proxy, "reverse_proxy.upstreams": _upstreams,
    "reverse_proxy.dynamic_upstreams": _dynamic_upstreams, "reverse_proxy.health_checks": _health_checks,
    "reverse_proxy.transport.tls": _upstream_tls, "reverse_proxy.transport.versions": _http_versions,
}
# Kept as written: the streaming settings verify judges, the routes it walks, and what runs the
# same on this machine (https://caddyserver.com/docs/json/).
KEPT = frozenset({
    "http", "http.servers", "http.grace_period", "http.shutdown_delay",
    *(f"server.{key}" for key in (
        "routes", "errors", "logs", "named_routes", "read_timeout", "read_header_timeout", "write_timeout",
        "idle_timeout", "keepalive_interval", "max_header_bytes", "enable_full_duplex", "protocols",
        "allow_h2c", "trusted_proxies", "trusted_proxies_strict", "client_ip_headers", "metrics")),
    # handler modules: only reverse_proxy dials anything
    "acme_server", "authentication", "copy_response", "copy_response_headers", "encode", "error",
    "file_server", "headers", "intercept", "invoke", "log_append", "map", "metrics", "push",
    "request_body", "rewrite", "static_response", "subroute", "templates", "tracing", "vars",
    *(f"reverse_proxy.{key}" for key in (
        "transport", "flush_interval", "buffer_requests", "buffer_responses", "request_buffers",
        "response_buffers", "max_buffer_size", "load_balancing", "headers", "rewrite", "handle_response",
        "trusted_proxies", "stream_timeout", "stream_close_delay", "circuit_breaker", "verbose_logs")),
    # the upstreams are dialled by address: the resolver is never asked
    *(f"reverse_proxy.transport.{key}" for key in (
        "protocol", "read_timeout", "write_timeout", "dial_timeout", "dial_fallback_delay",
        "response_header_timeout", "expect_continue_timeout", "max_response_header_size", "read_buffer_size",
        "write_buffer_size", "max_conns_per_host", "keep_alive", "compression", "resolver")),
})


def addresses(rewritten: Rewritten) -> list[tuple[str, str]]:
    """(where, host) for every `dial` and `listen` address the rewritten JSON names."""
    return [found for _, new, _ in rewritten.files.values() for found in _addresses(json.loads(new))]


def _addresses(data: Any, where: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "dial" and isinstance(value, str):
                out.append((f"{where}.dial", _host(value)))
            elif key == "listen" and isinstance(value, list):
                out.extend((f"{where}.listen", _host(a)) for a in value)
            else:
                out.extend(_addresses(value, f"{where}.{key}"))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out.extend(_addresses(value, f"{where}[{index}]"))
    return out


def _host(address: str) -> str:
    address = address.split("/", 1)[-1] if "/" in address.split(":")[0] else address  # tcp/host:port
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host.strip("[]") or "0.0.0.0"
