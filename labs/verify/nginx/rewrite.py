"""Rewrite a user's nginx config to run here, in front of the lab's server (see labs.verify.rewrite).

Every file the config reads is copied under the run's folder (absolute includes re-pointed to the
copies); listen sockets move to free loopback ports (the chat route's server gets its own), every
upstream server and *_pass target becomes the lab's server, TLS is dropped (the lab speaks plain
HTTP to the same server block), pid/log/temp/cache paths move into the folder, `user` goes when
not root, `resolver` and `mirror` go (no name is resolved, no request is duplicated).
"""
from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

import crossplane

from labs.verify.edits import MARK, TextEdits
from labs.verify.nginx.config import Directive, NginxConfig
from labs.verify.nginx.read import PASS_DIRECTIVES
from labs.verify.rewrite import Rewritten
from server.processes import free_port

TEMP_PATHS = ("client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path",
              "scgi_temp_path")
DROPPED_LISTEN_PARAMS = ("ssl", "http2", "proxy_protocol", "spdy")
KEPT_UPSTREAM_PARAMS = ("weight=", "max_fails=", "fail_timeout=", "backup", "down", "max_conns=",
                        "slow_start=")
NO_TLS = "TLS is off here: the lab speaks plain HTTP to this server block"


def rewrite(config: NginxConfig, server: Directive, lab_port: int, folder: Path, *,
            drop_user: bool = False) -> Rewritten:
    conf = folder / "conf"

    def mirror(file: str) -> Path:
        return conf / os.path.abspath(file).lstrip("/")

    edits = {file: TextEdits(Path(file).read_text()) for file in config.files}
    main_file = config.files[0]
    result = Rewritten("nginx", folder, mirror(main_file), listen_port=0)
    ports: dict[str, int] = {}
    seen_notes: set[str] = set()

    def note(text: str) -> None:
        if text not in seen_notes:
            seen_notes.add(text)
            result.notes.append(text)

    for d in config.main.walk():
        edit = edits[d.file]
        context = d.parent.name if d.parent else "main"
        if d.name == "include" and d.args and os.path.isabs(d.args[0]):
            edit.replace(d.line, "include", f"include {mirror(d.args[0])}")
        elif d.name == "user" and (drop_user or os.geteuid() != 0 or not _user_exists(d.args[0])):
            edit.remove(d.line, "user", "runs as the invoking user in a container" if drop_user else
                        "not root here" if os.geteuid() != 0 else "no such user here")
        elif d.name == "pid":
            edit.replace(d.line, "pid", f"pid {folder / 'nginx.pid'}")
        elif d.name == "daemon":
            edit.replace(d.line, "daemon", "daemon off")
        elif d.name == "error_log":
            level = [a for a in d.args[1:] if not a.startswith("syslog:")]
            edit.replace(d.line, "error_log", " ".join(["error_log", str(folder / "error.log"), *level]))
        elif d.name == "access_log" and d.args and d.args[0] != "off":
            edit.replace(d.line, "access_log", " ".join(["access_log", str(folder / "access.log"), *d.args[1:]]))
        elif d.name in TEMP_PATHS:
            edit.replace(d.line, d.name, " ".join([d.name, str(folder / d.name), *d.args[1:]]))
        elif d.name == "proxy_cache_path":
            edit.replace(d.line, d.name, " ".join([d.name, str(folder / f"cache-{d.line}"), *d.args[1:]]))
        elif d.name == "listen":
            key = ("own", id(server), d.args[0]) if d.parent is server else ("shared", context, _socket(d.args[0]))
            if "quic" in d.args:
                edit.remove(d.line, "listen", "QUIC (UDP) is not measured; the TCP listener is")
                continue
            port = ports.setdefault(repr(key), free_port())
            if d.parent is server and not result.listen_port:
                result.listen_port = port
            params = [a for a in d.args[1:] if a not in DROPPED_LISTEN_PARAMS and not a.startswith("ipv6only")]
            if any(a in d.args for a in ("ssl", "http2")):
                note(NO_TLS)
            edit.replace(d.line, "listen", " ".join(["listen", f"127.0.0.1:{port}", *params]))
        elif d.name == "server" and context == "upstream" and d.args:
            params = [a for a in d.args[1:] if a.startswith(KEPT_UPSTREAM_PARAMS)]
            edit.replace(d.line, "server", " ".join(["server", f"127.0.0.1:{lab_port}", *params]))
        elif d.name == "server" and context in ("http", "stream") and d.block is not None and not d.children("listen"):
            # nginx would listen on *:80 (or *:8000 unprivileged): give it a loopback port instead.
            port = free_port()
            if d is server:
                result.listen_port = port
            edit.insert_in_block(d.line, "server", [f"listen 127.0.0.1:{port};  # {MARK}: no listen given"],
                                 indent="        ")
        elif d.name in PASS_DIRECTIVES and d.args:
            target = _pass_target(d.args[0], lab_port, _upstream_names(config), stream=context == "server"
                                  and _in_stream(d))
            if target != d.args[0]:
                edit.replace(d.line, d.name, " ".join([d.name, target, *d.args[1:]]))
        elif d.name in ("resolver", "mirror", "proxy_bind") or d.name.startswith(("quic_", "http3")):
            edit.remove(d.line, d.name, {"resolver": "no name is resolved: every upstream is the lab's server",
                                         "mirror": "a mirror would send every request twice",
                                         "proxy_bind": "binds to an address of the user's machine"}.get(
                                             d.name, "QUIC is not measured"))
        elif _tls_directive(d.name):
            edit.remove(d.line, d.name, "TLS is off here")
            note(NO_TLS)
    _add_defaults(config, edits, folder)
    for file, edit in edits.items():
        result.files[file] = (edit.original, edit.apply(), mirror(file))
    (folder / "logs").mkdir(parents=True, exist_ok=True)  # nginx's default logs/access.log
    return result


def _add_defaults(config: NginxConfig, edits: dict[str, TextEdits], folder: Path) -> None:
    """What nginx would otherwise take from its compiled-in paths (outside the run's folder)."""
    main = edits[config.files[0]]
    top = []
    if config.main.first("daemon") is None:
        top.append("daemon off;")
    if config.main.first("pid") is None:
        top.append(f"pid {folder / 'nginx.pid'};")
    if config.main.first("error_log") is None:
        top.append(f"error_log {folder / 'error.log'} warn;")
    if top:
        main.insert_after(0, [f"# {MARK}: foreground, pid and log in the run's folder", *top], indent="")
    http = config.main.first("http")
    if http is None:
        return
    missing = [f"{name} {folder / name};" for name in TEMP_PATHS if http.first(name) is None]
    if missing:  # in the file the http block is written in (it may be an included one)
        edits[http.file].insert_in_block(http.line, "http", [f"# {MARK}: temp files in the run's folder",
                                                             *missing])


def _pass_target(arg: str, lab_port: int, upstreams: set[str], stream: bool) -> str:
    """proxy_pass & co: a named upstream stays (its servers are rewritten); anything else -> lab."""
    if stream:
        return arg if arg in upstreams else f"127.0.0.1:{lab_port}"
    match = re.match(r"^(?P<scheme>[a-z]+)://(?P<host>\$\{?\w+\}?|[^/$]+)(?P<rest>.*)$", arg)
    if match is None:  # fastcgi_pass host:port, unix:/path
        return arg if arg in upstreams else f"127.0.0.1:{lab_port}"
    if match["host"] in upstreams:
        return arg
    scheme = {"https": "http", "grpcs": "grpc"}.get(match["scheme"], match["scheme"])
    return f"{scheme}://127.0.0.1:{lab_port}{match['rest']}"


def _upstream_names(config: NginxConfig) -> set[str]:
    return {u.args[0] for u in config.blocks("upstream") if u.args}


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


def _tls_directive(name: str) -> bool:
    return name in ("ssl", "http2") or (name.startswith("ssl_") and not name.startswith("ssl_preread"))


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def addresses(main: Path) -> list[tuple[str, str]]:
    """Every address the rewritten config names (parsed again): listens, upstreams, passes, logs."""
    payload = crossplane.parse(str(main), comments=False, catch_errors=True)
    found: list[tuple[str, str]] = []
    for entry in payload["config"]:
        stack = [(d, "main") for d in entry["parsed"]]
        while stack:
            d, context = stack.pop()
            where = f"{entry['file']}:{d['line']}"
            args, name = d.get("args", []), d["directive"]
            if name in ("listen", *PASS_DIRECTIVES) or (name == "server" and context == "upstream"):
                if args and not (name in PASS_DIRECTIVES and _is_upstream_ref(args[0], payload)):
                    found.append((where, _host(args[0])))
            elif name in ("resolver", "proxy_bind"):
                found.extend((where, a) for a in args if not a.startswith(("valid=", "ipv6=", "status_zone=")))
            elif name in ("error_log", "access_log") and args and args[0].startswith("syslog:"):
                found.append((where, _host(args[0].split("server=", 1)[-1].split(",")[0])))
            stack.extend((child, name) for child in d.get("block", []))
    return found


def _is_upstream_ref(arg: str, payload: dict) -> bool:
    host = re.sub(r"^[a-z]+://", "", arg).split("/", 1)[0]
    for entry in payload["config"]:
        stack = list(entry["parsed"])
        while stack:
            d = stack.pop()
            if d["directive"] == "upstream" and d.get("args", [None])[0] == host:
                return True
            stack.extend(d.get("block", []))
    return False


def _host(arg: str) -> str:
    arg = re.sub(r"^[a-z]+://", "", arg).split("/", 1)[0]
    if arg.startswith("["):
        return arg[1:arg.index("]")]
    if re.fullmatch(r"\d+", arg):
        return "*"  # a bare port listens on every address
    return arg.rsplit(":", 1)[0] if ":" in arg else arg
