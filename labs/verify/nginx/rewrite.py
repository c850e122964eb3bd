"""Rewrite a user's nginx config to run here, in front of the lab's server (see labs.verify.rewrite).

A table of handlers, one per directive (`HANDLERS`); what it does not name is kept as written, and
`KEPT` declares which of those verify looked at. Every file the config reads is copied under the
run's folder (absolute includes re-pointed to the copies; an include of a file that is not here
is left out and said), listen sockets move to free loopback ports (the chat route's server gets
its own), every upstream server and *_pass target becomes the lab's server
(labs/verify/nginx/targets.py), TLS listeners keep TLS with the run's certificate while TLS to the
upstream goes (the lab speaks plain HTTP), pid/log/temp/cache paths move into the folder, dynamic
modules are loaded from where this machine has them, `user` goes when not root, `resolver` and
`mirror` go (no name is resolved, no request is duplicated). What the rewrite adds besides is
labs/verify/nginx/additions.py's. Everything is built in memory: the run's folder is filled by
`Rewritten.write()`, after the loopback check.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from labs.verify.edits import MARK, TextEdits
from labs.verify.nginx import tls, versions
from labs.verify.nginx.additions import (TEMP_PATHS, UPSTREAM_ACCESS_LOG, add_defaults, certify, contacted,
                                         intended_defaults, let_workers_in, user_exists)
from labs.verify.nginx.config import Directive, NginxConfig
from labs.verify.nginx.modsecurity_files import copy_data, mirror_rules
from labs.verify.nginx.settings import READ
from labs.verify.nginx.targets import PASS_DIRECTIVES, add_module, module_here, pass_target
from labs.verify.plan import RunPlan, handler_for, reason
from labs.verify.rewrite import FAILS_THE_CHECK, Rewritten
from labs.verify.tls import pair_in, run_pair
from proxies.binaries import find_binary
from server.processes import free_port

DROPPED_LISTEN_PARAMS = ("proxy_protocol", "spdy")
KEPT_UPSTREAM_PARAMS = ("weight=", "max_fails=", "fail_timeout=", "backup", "down", "max_conns=",
                        "slow_start=")


@dataclass
class _Run:
    """One rewrite in progress: what every handler reads and edits."""

    config: NginxConfig
    server: Directive  # the chosen route's server: its listen is the one verify measures
    plan: RunPlan
    result: Rewritten
    edits: dict[str, TextEdits]
    binary: str | None  # the nginx that runs it (relative load_module paths mean its prefix)
    formats: set[str]  # the log formats defined here
    ports: dict[str, int] = field(default_factory=dict)  # a listen socket -> its loopback port
    pair_used: bool = False  # the run's certificate is named: made at write

    @property
    def folder(self) -> Path:
        return self.plan.folder

    def mirror(self, file: str) -> Path:
        return _mirrored(self.folder, file)

    def pair(self) -> tuple[Path, Path]:
        self.pair_used = True
        return pair_in(self.folder)

    def note(self, text: str) -> None:
        if text not in self.result.notes:
            self.result.notes.append(text)

    def replace(self, d: Directive, new: str) -> None:
        self.edits[d.file].replace(d.line, d.name, new, d.nth)

    def remove(self, d: Directive, why: str) -> None:
        self.edits[d.file].remove(d.line, d.name, why, d.nth)


def rewrite(config: NginxConfig, server: Directive, plan: RunPlan) -> Rewritten:
    """`config` as it runs here, in memory; `server`: the one that serves the chosen route."""
    folder = plan.folder
    binary = find_binary("nginx", plan.series)
    result = Rewritten("nginx", folder, _mirrored(folder, config.files[0]), listen_port=0,
                       labels=dict(config.labels), contacted=lambda: contacted(folder))
    formats = {"combined"} | {d.args[0] for d in config.main.walk() if d.name == "log_format" and d.args}
    run = _Run(config, server, plan, result, {file: TextEdits(Path(file).read_text()) for file in config.files},
               binary, formats)
    for d in config.main.walk():
        handler = handler_for(HANDLERS, d.name)
        if handler is not None:
            handler(run, d)
    add_defaults(config, run.edits, folder)
    certify(config, run.edits, run.pair)
    if plan.version is not None:
        intended_defaults(config, run.edits, versions.TABLE.parse(plan.version),
                          versions.TABLE.binary_version(binary), run.note)
    for file, edit in run.edits.items():
        result.files[file] = (edit.original, edit.apply(), run.mirror(file))
    if run.pair_used:
        result.on_write.append(lambda: run_pair(folder))
    result.on_write.append(lambda: (folder / "logs").mkdir(parents=True, exist_ok=True))  # nginx's default logs/access.log
    if not plan.in_container:
        result.on_write.append(lambda: let_workers_in(config, folder))
    return result


Handler = Callable[[_Run, Directive], None]


def _include(run: _Run, d: Directive) -> None:
    config = run.config
    if not d.args:
        return
    if d is config.site_include and d.nth < 0:  # the user's main had no site include
        run.edits[d.file].insert_at_block_end(d.line, "http", [f"include {run.mirror(config.entry)};  # {MARK}: "
                                                               "the site file"], indent="    ")
    elif any(missing is d for missing in config.missing):
        run.remove(d, reason("include-missing"))
    elif not config.included.get(id(d)):
        run.remove(d, reason("include-no-match"))
    else:
        run.replace(d, "; ".join(f"include {run.mirror(f)}" for f in config.included[id(d)]))


def _load_module(run: _Run, d: Directive) -> None:
    if not d.args:
        return
    found = module_here(d.args[0], run.binary)
    not_added = add_module(d.args[0], run.binary) if found is None else None
    found = found or (module_here(d.args[0], run.binary) if not_added is None else None)
    if found is None:
        run.remove(d, reason("module-missing"))
        run.note(f"the dynamic module {d.args[0]} ({d.where}) is not installed here for the nginx that "
                 f"runs it (a module loads only into the nginx build it was made for; {not_added}): "
                 f"{FAILS_THE_CHECK}")
    elif found != d.args[0]:
        run.replace(d, f"load_module {found}")


def _modsecurity_rules_file(run: _Run, d: Directive) -> None:
    if not d.args:
        return
    path = d.args[0] if os.path.isabs(d.args[0]) else os.path.join(os.path.dirname(d.file), d.args[0])
    data: dict[Path, Path] = {}
    copy = mirror_rules(path, run.folder, run.mirror, run.result.files, data)
    run.replace(d, f"modsecurity_rules_file {copy}")
    if data:
        run.result.on_write.append(lambda: copy_data(data))


def _user(run: _Run, d: Directive) -> None:
    if run.plan.in_container:
        run.remove(d, reason("user-in-container"))
    elif os.geteuid() != 0:
        run.remove(d, reason("user-not-root"))
    elif not user_exists(d.args[0]):
        run.remove(d, reason("user-missing"))


def _pid(run: _Run, d: Directive) -> None:
    run.replace(d, f"pid {run.folder / 'nginx.pid'}")


def _daemon(run: _Run, d: Directive) -> None:
    run.replace(d, "daemon off")


def _error_log(run: _Run, d: Directive) -> None:
    level = [a for a in d.args[1:] if not a.startswith("syslog:")]
    run.replace(d, " ".join(["error_log", str(run.folder / "error.log"), *level]))


def _access_log(run: _Run, d: Directive) -> None:
    if not d.args:
        return
    upstream_log = UPSTREAM_ACCESS_LOG.format(folder=run.folder)
    if d.args[0] == "off":
        # `off` cancels every access_log of its level: the upstream log replaces it there.
        run.replace(d, upstream_log)
        return
    # A level with its own access_log inherits none: the upstream log goes beside it.
    params = d.args[1:]
    if params and params[0] not in run.formats and "=" not in params[0]:
        # A site file's format comes from the main config it was written for.
        run.note(f"log format {params[0]!r} ({d.where}) is defined by no file here (the main config "
                 "it was written for?): logged in nginx's combined format instead")
        params = params[1:]
    run.replace(d, " ".join(["access_log", str(run.folder / "access.log"), *params]) + "; " + upstream_log)


def _temp_path(run: _Run, d: Directive) -> None:
    run.replace(d, " ".join([d.name, str(run.folder / d.name), *d.args[1:]]))


def _cache_path(run: _Run, d: Directive) -> None:
    run.replace(d, " ".join([d.name, str(run.folder / f"cache-{d.line}"), *d.args[1:]]))


def _listen(run: _Run, d: Directive) -> None:
    if "quic" in d.args:
        run.remove(d, reason("quic"))
        return
    result, own = run.result, d.parent is run.server
    key = ("own", id(run.server), d.args[0]) if own else ("shared", _context(d), _socket(d.args[0]))
    port = run.ports.setdefault(repr(key), free_port())
    secure = tls.is_tls_listen(d.args)
    if own and (not result.listen_port or (secure and not result.tls)):
        # Deployed clients reach the chat route over TLS when the server offers it.
        result.listen_port, result.tls = port, secure
    params = [a for a in d.args[1:] if a not in DROPPED_LISTEN_PARAMS and not a.startswith("ipv6only")]
    if secure and d.parent is not None and _http2_on(d.parent) and "http2" not in params:
        params.append("http2")  # `http2 on;` (1.25.1) is a listen parameter for nginx 1.22
    if secure:
        run.note(reason("tls-kept"))
    run.replace(d, " ".join(["listen", f"127.0.0.1:{port}", *params]))


def _server(run: _Run, d: Directive) -> None:
    """An upstream's `server` becomes the lab's; a virtual server without a listen gets one."""
    context = _context(d)
    if context == "upstream" and d.args:
        params = [a for a in d.args[1:] if a.startswith(KEPT_UPSTREAM_PARAMS)]
        index = d.parent.children("server").index(d) if d.parent is not None else 0
        run.replace(d, " ".join(["server", f"127.0.0.1:{run.plan.upstream_port(index)}", *params]))
    elif context in ("http", "stream") and d.block is not None and not d.children("listen"):
        # nginx would listen on *:80 (or *:8000 unprivileged): give it a loopback port instead.
        port = free_port()
        if d is run.server:
            run.result.listen_port = port
        run.edits[d.file].insert_in_block(d.line, "server", [f"listen 127.0.0.1:{port};  # {MARK}: no listen given"],
                                          indent="        ")


def _pass(run: _Run, d: Directive) -> None:
    if not d.args:
        return
    upstreams = {u.args[0] for u in run.config.blocks("upstream") if u.args}
    target = pass_target(d.name, d.args[0], run.plan.lab_port, upstreams,
                         stream=_context(d) == "server" and _in_stream(d))
    if target != d.args[0]:
        run.replace(d, " ".join([d.name, target, *d.args[1:]]))


def _certificate(run: _Run, d: Directive) -> None:
    if d.args:
        run.replace(d, tls.replacement(d.name, run.pair()))


def _http2(run: _Run, d: Directive) -> None:
    if d.args[:1] == ["on"]:
        run.remove(d, reason("http2-listen-param"))


def _removed(key: str) -> Handler:
    """A directive that cannot work here, commented out with the reason `key`."""
    return lambda run, d: run.remove(d, reason(key))


HANDLERS: dict[str, Handler] = {
    "include": _include, "load_module": _load_module, "user": _user, "pid": _pid, "daemon": _daemon,
    "modsecurity_rules_file": _modsecurity_rules_file,
    "error_log": _error_log, "access_log": _access_log, "proxy_cache_path": _cache_path,
    **{name: _temp_path for name in TEMP_PATHS},
    "listen": _listen, "server": _server, "http2": _http2,
    **{name: _pass for name in PASS_DIRECTIVES},
    **{f"{upstream}_ssl_*": _removed("upstream-tls") for upstream in ("proxy", "grpc", "uwsgi")},
    "resolver": _removed("resolver"), "mirror": _removed("mirror"), "proxy_bind": _removed("bind-address"),
    "quic_*": _removed("quic-settings"), "http3*": _removed("quic-settings"),
    **{name: _certificate for name in tls.PAIR},
    **{name: _removed(key) for name, key in tls.REMOVED.items()},
}
# Kept as the user wrote them: what the reading reads (labs/verify/nginx/settings.py) and the other
# settings a stream passes through, since measuring them as written is the point of verify; the
# blocks and matchers that choose the route; what changes nothing on this machine.
KEPT: frozenset[str] = READ | frozenset({
    "proxy_busy_buffers_size", "proxy_max_temp_file_size", "proxy_next_upstream", "proxy_next_upstream_tries",
    "proxy_next_upstream_timeout", "proxy_hide_header", "proxy_pass_header", "proxy_redirect", "proxy_cache_bypass", "proxy_no_cache", "proxy_cache_valid", "proxy_cache_key",
    "keepalive_timeout", "keepalive_requests", "send_timeout", "client_body_timeout",
    "client_header_timeout", "client_max_body_size", "client_body_buffer_size", "http2_max_concurrent_streams",
    "limit_conn_zone", "limit_conn_status", "limit_req", "limit_req_zone", "limit_req_status",
    "gzip_min_length", "gzip_comp_level", "gzip_vary", "gzip_buffers", "gzip_disable", "postpone_output",
    "sendfile", "tcp_nopush", "tcp_nodelay", "add_header",
    # The blocks and matchers that choose the route (labs/verify/nginx/routes.py).
    "http", "events", "stream", "location", "upstream", "server_name", "if", "map", "types", "try_files",
    "return", "rewrite", "error_page", "internal", "set", "default_type", "root", "index", "alias",
    "allow", "deny", "auth_basic", "auth_basic_user_file", "auth_request",
    # Which peer of an upstream a request reaches (an MCP pool's session affinity: proxies/fixed/).
    "zone", "sticky", "hash",
    # Nothing of this machine's: formats, sizes and the TLS protocol the listener keeps.
    "log_format", "server_tokens", "types_hash_max_size", "server_names_hash_bucket_size", "charset",
    "multi_accept", "use", "ssl_protocols", "ssl_ciphers", "ssl_prefer_server_ciphers", "ssl_session_cache",
    "ssl_session_timeout", "ssl_session_tickets", "ssl_buffer_size",
})


def _mirrored(folder: Path, file: str) -> Path:
    """Where a file of the user's config is copied in the run's folder (its absolute path under conf/)."""
    return folder / "conf" / os.path.abspath(file).lstrip("/")


def _context(d: Directive) -> str:
    return d.parent.name if d.parent else "main"


def _in_stream(d: Directive) -> bool:
    node = d.parent
    while node is not None:
        if node.name == "stream":
            return True
        node = node.parent
    return False


def _socket(arg: str) -> str:
    if arg.startswith("unix:"):
        return arg
    if re.fullmatch(r"\d+", arg):
        return f"*:{arg}"
    if arg.startswith("[") and "]:" not in arg:
        return f"{arg}:80"
    return arg if re.search(r":\d+$", arg) else f"{arg}:80"


def _http2_on(server: Directive) -> bool:
    found = server.first("http2") or (server.parent.first("http2") if server.parent else None)
    return found is not None and found.args[:1] == ["on"]
