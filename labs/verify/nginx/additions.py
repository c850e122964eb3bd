"""What the rewrite adds to a user's nginx config so it runs here, beside the directives it edits
(labs/verify/nginx/rewrite.py): the foreground, pid, logs and temp paths nginx would otherwise take
from its compiled-in paths, the log of every upstream address contacted (the loopback-only
check), the run's certificate where a TLS server's own is not here, the defaults of the nginx the
config is written for, and, started as root, the workers' way into the run's folder.
"""
from __future__ import annotations

import os
import pwd
import re
from pathlib import Path
from typing import Callable

from labs.verify import records
from labs.verify.edits import MARK, TextEdits
from labs.verify.nginx import tls, versions
from labs.verify.nginx.config import NginxConfig

TEMP_PATHS = ("client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path",
              "scgi_temp_path")
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


def add_defaults(config: NginxConfig, edits: dict[str, TextEdits], folder: Path) -> None:
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


def intended_defaults(config: NginxConfig, edits: dict[str, TextEdits], intended: versions.Version,
                      here: versions.Version | None, note: Callable[[str], None]) -> None:
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


def certify(config: NginxConfig, edits: dict[str, TextEdits], pair: Callable[[], tuple[Path, Path]]) -> None:
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


def let_workers_in(config: NginxConfig, folder: Path) -> None:
    """Started as root, nginx runs its workers as another user (the config's `user`, else nobody):
    they must reach the cache and temp folders nginx makes in the run's folder, which a temporary
    folder (0700) keeps from them. Only that user's group is let through (0710), not everyone."""
    if os.geteuid() != 0:
        return
    import grp
    user = config.main.first("user")
    names = (user.args + user.args[:1])[:2] if user is not None and user.args else []
    if not names or not user_exists(names[0]):
        names = ["nobody", "nogroup"]  # no user, or one the rewrite dropped: nginx's default
    try:
        gid = grp.getgrnam(names[1]).gr_gid
    except KeyError:
        gid = pwd.getpwnam(names[0]).pw_gid
    os.chown(folder, -1, gid)
    os.chmod(folder, 0o710)


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
