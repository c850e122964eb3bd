"""Rewrite a user's nginx config to run here, in front of the lab's server (see labs.verify.rewrite).

Every file the config reads is copied under the run's folder (absolute includes re-pointed to the
copies; an include of a file that is not here is left out and said), listen sockets move to free
loopback ports (the chat route's server gets its own), every upstream server and *_pass target
becomes the lab's server (labs/verify/nginx/targets.py), TLS is dropped (the lab speaks plain
HTTP to the same server block), pid/log/temp/cache paths move into the folder, dynamic modules
are loaded from where this machine has them, `user` goes when not root, `resolver` and `mirror`
go (no name is resolved, no request is duplicated).
"""
from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

from labs.verify import records
from labs.verify.edits import MARK, TextEdits
from labs.verify.nginx import tls, versions
from labs.verify.nginx.config import Directive, NginxConfig
from labs.verify.nginx.targets import PASS_DIRECTIVES, module_here, pass_target
from labs.verify.rewrite import Rewritten
from labs.verify.tls import run_pair
from server.processes import free_port

TEMP_PATHS = ("client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path",
              "scgi_temp_path")
DROPPED_LISTEN_PARAMS = ("proxy_protocol", "spdy")
KEPT_UPSTREAM_PARAMS = ("weight=", "max_fails=", "fail_timeout=", "backup", "down", "max_conns=",
                        "slow_start=")
TLS_KEPT = ("TLS is kept: the TLS listeners serve a certificate made for the run (self-signed, for "
            "127.0.0.1), and verify measures them over TLS")
# Every upstream address nginx contacts, one per request, for the loopback-only check.
UPSTREAM_LOG = "upstreams.log"
UPSTREAM_FORMAT = "streamlab_upstream"
UPSTREAM_ACCESS_LOG = "access_log {folder}/" + UPSTREAM_LOG + " " + UPSTREAM_FORMAT


def contacted(folder: Path) -> set[str]:
    """Every address in the upstream log ($upstream_addr: `a:1, b:2 : c:3` when nginx tried
    several), and every `connect() to` of the error log (a failed try logs no upstream line)."""
    seen = {a.strip() for line in records.log_text(folder, UPSTREAM_LOG).splitlines()
            for a in re.split(r"[,:]\s+|\s*,\s*", line) if a.strip() and a.strip() != "-"}
    return seen | records.addresses(r"connect\(\) to " + records.ADDRESS, records.log_text(folder, "error.log"))


def rewrite(config: NginxConfig, server: Directive, lab_port: int, folder: Path, *,
            drop_user: bool = False, binary: str | None = None, version: str | None = None) -> Rewritten:
    conf = folder / "conf"

    def mirror(file: str) -> Path:
        return conf / os.path.abspath(file).lstrip("/")

    edits = {file: TextEdits(Path(file).read_text()) for file in config.files}
    main_file = config.files[0]
    result = Rewritten("nginx", folder, mirror(main_file), listen_port=0, labels=dict(config.labels),
                       contacted=lambda: contacted(folder))
    missing = {id(d) for d in config.missing}
    made: list[tuple[Path, Path]] = []

    def pair() -> tuple[Path, Path]:
        if not made:
            made.append(run_pair(folder))
        return made[0]
    formats = {"combined"} | {d.args[0] for d in config.main.walk() if d.name == "log_format" and d.args}
    ports: dict[str, int] = {}
    seen_notes: set[str] = set()

    def note(text: str) -> None:
        if text not in seen_notes:
            seen_notes.add(text)
            result.notes.append(text)

    for d in config.main.walk():
        edit = _At(edits[d.file], d)
        context = d.parent.name if d.parent else "main"
        if d.name == "include" and d.args:
            if d is config.site_include and d.nth < 0:  # the user's main had no site include
                edits[d.file].insert_at_block_end(d.line, "http", [f"include {mirror(config.entry)};  # {MARK}: "
                                                                   "the site file"], indent="    ")
            elif id(d) in missing:
                edit.remove("include", "not here: left out (see the notes)")
            elif not config.included.get(id(d)):
                edit.remove("include", "no file matches here")
            else:
                edit.replace("include", "; ".join(f"include {mirror(f)}" for f in config.included[id(d)]))
        elif d.name == "load_module" and d.args:
            found = module_here(d.args[0], binary)
            if found is None:
                edit.remove("load_module", "this module is not installed here")
                note(f"the dynamic module {d.args[0]} ({d.where}) is not installed here: directives "
                     "that need it fail the check")
            elif found != d.args[0]:
                edit.replace("load_module", f"load_module {found}")
        elif d.name == "user" and (drop_user or os.geteuid() != 0 or not _user_exists(d.args[0])):
            edit.remove("user", "runs as the invoking user in a container" if drop_user else
                        "not root here" if os.geteuid() != 0 else "no such user here")
        elif d.name == "pid":
            edit.replace("pid", f"pid {folder / 'nginx.pid'}")
        elif d.name == "daemon":
            edit.replace("daemon", "daemon off")
        elif d.name == "error_log":
            level = [a for a in d.args[1:] if not a.startswith("syslog:")]
            edit.replace("error_log", " ".join(["error_log", str(folder / "error.log"), *level]))
        elif d.name == "access_log" and d.args and d.args[0] == "off":
            # `off` cancels every access_log of its level: the upstream log replaces it there.
            edit.replace("access_log", UPSTREAM_ACCESS_LOG.format(folder=folder))
        elif d.name == "access_log" and d.args:
            # A level with its own access_log inherits none: the upstream log goes beside it.
            params = d.args[1:]
            if params and params[0] not in formats and "=" not in params[0]:
                # A site file's format comes from the main config it was written for.
                note(f"log format {params[0]!r} ({d.where}) is defined by no file here (the main config "
                     "it was written for?): logged in nginx's combined format instead")
                params = params[1:]
            edit.replace("access_log", " ".join(["access_log", str(folder / "access.log"), *params])
                         + "; " + UPSTREAM_ACCESS_LOG.format(folder=folder))
        elif d.name in TEMP_PATHS:
            edit.replace(d.name, " ".join([d.name, str(folder / d.name), *d.args[1:]]))
        elif d.name == "proxy_cache_path":
            edit.replace(d.name, " ".join([d.name, str(folder / f"cache-{d.line}"), *d.args[1:]]))
        elif d.name == "listen":
            key = ("own", id(server), d.args[0]) if d.parent is server else ("shared", context, _socket(d.args[0]))
            if "quic" in d.args:
                edit.remove("listen", "QUIC (UDP) is not measured; the TCP listener is")
                continue
            port = ports.setdefault(repr(key), free_port())
            secure = tls.is_tls_listen(d.args)
            if d.parent is server and (not result.listen_port or (secure and not result.tls)):
                # Deployed clients reach the chat route over TLS when the server offers it.
                result.listen_port, result.tls = port, secure
            params = [a for a in d.args[1:] if a not in DROPPED_LISTEN_PARAMS and not a.startswith("ipv6only")]
            if secure and d.parent is not None and _http2_on(d.parent) and "http2" not in params:
                params.append("http2")  # `http2 on;` (1.25.1) is a listen parameter for nginx 1.22
            if secure:
                note(TLS_KEPT)
            edit.replace("listen", " ".join(["listen", f"127.0.0.1:{port}", *params]))
        elif d.name == "server" and context == "upstream" and d.args:
            params = [a for a in d.args[1:] if a.startswith(KEPT_UPSTREAM_PARAMS)]
            edit.replace("server", " ".join(["server", f"127.0.0.1:{lab_port}", *params]))
        elif d.name == "server" and context in ("http", "stream") and d.block is not None and not d.children("listen"):
            # nginx would listen on *:80 (or *:8000 unprivileged): give it a loopback port instead.
            port = free_port()
            if d is server:
                result.listen_port = port
            edits[d.file].insert_in_block(d.line, "server", [f"listen 127.0.0.1:{port};  # {MARK}: no listen given"],
                                 indent="        ")
        elif d.name in PASS_DIRECTIVES and d.args:
            target = pass_target(d.name, d.args[0], lab_port, _upstream_names(config),
                                 stream=context == "server" and _in_stream(d))
            if target != d.args[0]:
                edit.replace(d.name, " ".join([d.name, target, *d.args[1:]]))
        elif d.name.startswith(("proxy_ssl_", "grpc_ssl_", "uwsgi_ssl_")):
            edit.remove(d.name, "the lab's server speaks plain HTTP")
        elif d.name in ("resolver", "mirror", "proxy_bind") or d.name.startswith(("quic_", "http3")):
            edit.remove(d.name, {"resolver": "no name is resolved: every upstream is the lab's server",
                                         "mirror": "a mirror would send every request twice",
                                         "proxy_bind": "binds to an address of the user's machine"}.get(
                                             d.name, "QUIC is not measured"))
        elif d.name in tls.PAIR and d.args:
            edit.replace(d.name, tls.replacement(d.name, pair()))
        elif d.name in tls.REMOVED:
            edit.remove(d.name, tls.REMOVED[d.name])
        elif d.name == "http2" and d.args[:1] == ["on"]:
            edit.remove("http2", "nginx 1.22 takes http2 as a parameter of the ssl listens (added there)")
    _add_defaults(config, edits, folder)
    _certify(config, edits, pair)
    if version is not None:
        _intended_defaults(config, edits, versions.TABLE.parse(version), versions.TABLE.binary_version(binary), note)
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
    # In the file the http block is written in (it may be an included one), first in the block:
    # the format must be known before any access_log names it.
    edits[http.file].insert_in_block(http.line, "http", [
        f"# {MARK}: temp files in the run's folder; every upstream address contacted, logged",
        *missing, f"log_format {UPSTREAM_FORMAT} '$upstream_addr';",
        UPSTREAM_ACCESS_LOG.format(folder=folder) + ";"])


def _intended_defaults(config: NginxConfig, edits: dict[str, TextEdits], intended: versions.Version,
                       here: versions.Version | None, note) -> None:
    """The defaults of the nginx the config is written for, where the nginx here has others:
    written explicitly where nginx would apply the default, so the run behaves as that version."""
    if here is None or here == intended:
        return
    http = config.main.first("http")
    differ = {name: new for name, _, new, _ in versions.TABLE.changes_between(here, intended)}
    if http is None or not differ:
        return
    added: list[str] = []
    if "proxy_http_version" in differ and http.first("proxy_http_version") is None:
        added.append(f"proxy_http_version {differ['proxy_http_version']};")
    if "proxy_set_header Connection" in differ:
        value = differ["proxy_set_header Connection"]
        header = f'proxy_set_header Connection "{value}";'
        blocks = [b for b in config.main.walk() if b.name in ("server", "location") and b.block is not None
                  and b.parent is not None and b.parent.name in ("http", "server", "location")]
        for block in blocks:  # a level with headers of its own inherits none: it gets the default too
            headers = block.children("proxy_set_header")
            if headers and not any(h.args and h.args[0].lower() == "connection" for h in headers):
                edits[block.file].insert_in_block(block.line, block.name, [f"{header}  # {MARK}: nginx "
                                                                          f"{versions.shown(intended)}'s default"])
        if not http.children("proxy_set_header"):
            added.append(header)
    if "keepalive" in differ:
        count = differ["keepalive"].split()[0] if differ["keepalive"] else "0"
        for upstream in config.blocks("upstream"):
            if upstream.first("keepalive") is None and count != "0":
                edits[upstream.file].insert_in_block(upstream.line, "upstream", [
                    f"keepalive {count};  # {MARK}: nginx {versions.shown(intended)}'s default"])
    if added:
        edits[http.file].insert_in_block(http.line, "http", [
            f"# {MARK}: nginx {versions.shown(intended)}'s defaults, which nginx {versions.shown(here)} "
            "here does not have", *added])
    note(f"nginx {versions.shown(intended)}'s defaults are written into the run ({', '.join(differ)}): the "
         f"nginx here is {versions.shown(here)}")


def let_workers_in(config: NginxConfig, folder: Path) -> None:
    """Started as root, nginx runs its workers as another user (the config's `user`, else nobody):
    they must reach the cache and temp folders nginx makes in the run's folder, which a temporary
    folder (0700) keeps from them. Only that user's group is let through (0710), not everyone."""
    if os.geteuid() != 0:
        return
    import grp
    user = config.main.first("user")
    names = (user.args + user.args[:1])[:2] if user is not None and user.args else []
    if not names or not _user_exists(names[0]):
        names = ["nobody", "nogroup"]  # no user, or one the rewrite dropped: nginx's default
    try:
        gid = grp.getgrnam(names[1]).gr_gid
    except KeyError:
        gid = pwd.getpwnam(names[0]).pw_gid
    os.chown(folder, -1, gid)
    os.chmod(folder, 0o710)


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


def _http2_on(server: Directive) -> bool:
    found = server.first("http2") or (server.parent.first("http2") if server.parent else None)
    return found is not None and found.args[:1] == ["on"]


def _certify(config: NginxConfig, edits: dict[str, TextEdits], pair) -> None:
    """A TLS server whose certificate came from a file that is not here (a missing include, a
    main config elsewhere) gets the run's pair, so nginx starts it."""
    for server in config.blocks("server"):
        if server.parent is None or server.parent.name != "http":
            continue
        if not any(tls.is_tls_listen(l.args) for l in server.children("listen")):
            continue
        if server.first("ssl_certificate") or server.parent.first("ssl_certificate"):
            continue
        cert, key = pair()
        edits[server.file].insert_in_block(server.line, "server", [
            f"ssl_certificate {cert};  # {MARK}: the run's certificate", f"ssl_certificate_key {key};"])


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


class _At:
    """Edits of one directive's own statement: its line and its place among the same name there."""

    def __init__(self, edits: TextEdits, directive: Directive) -> None:
        self.edits, self.directive = edits, directive

    def replace(self, name: str, new: str) -> None:
        self.edits.replace(self.directive.line, name, new, self.directive.nth)

    def remove(self, name: str, why: str) -> None:
        self.edits.remove(self.directive.line, name, why, self.directive.nth)
