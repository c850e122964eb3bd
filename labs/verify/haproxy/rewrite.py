"""Rewrite a user's HAProxy config to run here, in front of the lab's server (see labs.verify.rewrite).

`bind` lines move to free loopback ports (the chat frontend's first), every `server` (and
`server-template`) points at the lab's server with TLS, DNS and health-check parameters dropped,
logs go to stdout, pid and stats sockets into the run's folder, `user`/`group`/`chroot`/`daemon`
go, and `resolvers`, `peers` and `mailers` sections are commented out (they name other hosts),
with what refers to them (`stick-table ... peers X`, a server's `resolvers X`, `do-resolve`).
Pattern and map files (`-f FILE`, `map_beg(FILE,...)`) and the files of a `return` rule (`file`,
`lf-file`, `errorfile`) or an `errorfile` are copied into the run when found beside the config, as
includes are; else a stand-in says what the reading assumed (an `errorfile` not found is dropped). `ssl` binds keep TLS with a certificate
made for the run (tls.py), and the chat frontend is measured on its TLS bind when it has one, so a
`redirect scheme https unless { ssl_fc }` is kept and holds as deployed. When the config is written
for another HAProxy version than the one here, that version's defaults are written in where they
differ (labs/verify/haproxy/versions.py).
"""
from __future__ import annotations

import csv
import os
import re
import socket
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.edits import MARK, TextEdits
from labs.verify.haproxy import acl, tls, versions
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement, words_of
from labs.verify.model import ROUTE_PATH, display_path
from labs.verify.rewrite import Rewritten
from labs.verify.tls import run_bundle
from server.processes import free_port

BIND_KEPT = ("maxconn", "backlog", "name")
BIND_FLAGS_KEPT = ("tfo", "defer-accept")
SERVER_DROPPED_FLAGS = {"ssl", "check", "check-ssl", "no-check", "send-proxy", "send-proxy-v2", "no-verifyhost"}
SERVER_DROPPED_WITH_VALUE = {"verify", "ca-file", "crt", "sni", "resolvers", "init-addr", "resolve-prefer",
                             "resolve-net",
                             "alpn", "check-sni", "addr", "port", "inter", "fall", "rise", "resolve-opts",
                             "check-alpn", "ciphers", "verifyhost", "agent-check", "agent-port", "agent-inter"}
REMOVED_SECTIONS = {"resolvers": "names DNS servers of the user's network", "peers": "names peer hosts",
                    "mailers": "names mail servers"}
STDOUT_LOG = "log stdout format raw local0 info"
VERIFY_SOCKET = "verify-stats.sock"


_FILE_REF = re.compile(r"\b((?:map(?:_\w+)?|set-map|del-map|add-acl|del-acl)\()([^,)\s]+)")
# The `return` action's payload files (docs.haproxy.org/2.6/configuration.html#4.2-http-request%20return).
REPLY_FILES = ("file", "lf-file", "errorfile")
REPLY_RULES = ("http-request", "http-response", "http-after-response")


def rewrite(config: HaproxyConfig, frontend: Section, lab_port: int, folder: Path, *,
            drop_user: bool = False, route_path: str = ROUTE_PATH, host: str | None = None,
            binary: str | None = None, version: str | None = None) -> Rewritten:
    edit = TextEdits(config.text, terminator="\n")
    lines = config.text.splitlines()
    files = _Files(config, folder, route_path, host)
    result = Rewritten("haproxy", folder, folder / "conf" / "haproxy.cfg", listen_port=0)
    not_root = drop_user or os.geteuid() != 0
    made: list[Path] = []

    def bundle() -> Path:
        if not made:
            made.append(run_bundle(folder))
        return made[0]

    def note(text: str) -> None:
        if text not in result.notes:
            result.notes.append(text)

    bind_defaults = {} if version is None else versions.intended_defaults(
        config, edit, versions.TABLE.parse(version), versions.TABLE.binary_version(binary), note)
    for section in config.sections:
        if section.kind in REMOVED_SECTIONS:
            edit.remove(section.line, section.kind, REMOVED_SECTIONS[section.kind])
            for statement in section.statements:
                edit.remove(statement.line, statement.keyword, REMOVED_SECTIONS[section.kind])
            continue
        for statement in section.statements:
            words, line, key = statement.words, statement.line, statement.keyword
            if key in ("user", "group", "uid", "gid") and section.kind == "global":
                if not_root:
                    edit.remove(line, key, "runs as the invoking user in a container" if drop_user else "not root here")
            elif key in tls.GLOBALS_DROPPED and section.kind == "global":
                edit.remove(line, key, tls.GLOBALS_DROPPED[key])
            elif key in ("chroot", "daemon", "master-worker"):
                edit.remove(line, key, "the run stays in its own folder, in the foreground")
            elif key == "maxconn" and section.kind == "global" and words[1:2] and words[1].isdigit() \
                    and int(words[1]) > _fd_allowed():
                edit.replace(line, key, f"maxconn {_fd_allowed()}")
                note(f"global maxconn {words[1]} needs about {2 * int(words[1])} open files; this machine "
                     f"allows {_fd_hard_limit()}, so it runs with maxconn {_fd_allowed()} here")
            elif key == "pidfile":
                edit.replace(line, key, f"pidfile {folder / 'haproxy.pid'}")
            elif key == "log" and words[1:2] != ["global"] and not words[1:2] == ["stdout"]:
                edit.replace(line, key, STDOUT_LOG)
            elif key == "stats" and words[1:2] == ["socket"]:
                edit.replace(line, key, " ".join(["stats socket", str(folder / "stats.sock"),
                                                  *_keep_socket_params(words[3:])]))
            elif key == "bind":
                port, secure = free_port(), tls.is_tls_bind(words)
                if section is frontend and (not result.listen_port or (secure and not result.tls)):
                    # Deployed clients reach the chat route over TLS when the frontend offers it.
                    result.listen_port, result.tls = port, secure
                params = _keep(words[2:], BIND_KEPT) + [w for w in words[2:] if w in BIND_FLAGS_KEPT]
                if secure:
                    params += tls.bind_params(words, bundle(), note) + bind_defaults.get(line, [])
                    note(tls.TLS_KEPT)
                elif any(w in ("crt", "crt-list") for w in words):
                    note("a bind with crt but no ssl speaks plain HTTP (as HAProxy runs it): its files are dropped")
                edit.replace(line, key, " ".join(["bind", f"127.0.0.1:{port}", *params]))
            elif key in ("server", "default-server", "server-template"):
                edit.replace(line, key, _server(statement, lab_port, config))
                if "check" in words:
                    note("health checks are off: they would probe the lab's server instead of yours")
                if any(w in ("resolvers", "init-addr", "resolve-prefer", "resolve-opts") for w in words):
                    note("DNS resolution of servers is off (resolvers, init-addr): every server is the lab's")
            elif key == "stick-table" and "peers" in words[:-1]:
                at = words.index("peers")
                edit.replace(line, key, " ".join(words[:at] + words[at + 2:]))
                note(f"stick-table without peers {words[at + 1]}: the peers section names other hosts")
            elif any("do-resolve(" in w for w in words):
                edit.remove(line, key, "it uses a resolvers section, commented out here")
            elif (replies := key in REPLY_RULES and words[1:2] == ["return"]
                  and any(w in REPLY_FILES for w in words[:-1])) or "-f" in words[:-1] \
                    or any(_FILE_REF.search(w) for w in words):
                text = files.relocate(lines[line - 1], key, statement, note)
                edit.replace(line, key, files.reply(text, words, note) if replies else text)
            elif key == "errorfile" and len(words) > 2:
                found = acl.pattern_file(words[2], config.file.parent)
                if found is not None:
                    edit.replace(line, key, f"errorfile {words[1]} {files.copy(words[2], found)}")
                else:
                    edit.remove(line, key, "the file is not beside the config (HAProxy's own page is used)")
            elif key == "http-check" or words[:2] == ["option", "httpchk"]:
                edit.remove(line, key if key == "http-check" else "option", "health checks are off")
    _add_stats_socket(config, edit, folder, result)
    rewritten = edit.apply()
    result.files[str(config.file)] = (config.text, rewritten, result.main)
    result.files.update(files.written)
    return result


def _add_stats_socket(config: HaproxyConfig, edit: TextEdits, folder: Path, result: Rewritten) -> None:
    """verify's own stats socket: after the run, each server's session count and address say what
    HAProxy really contacted (the loopback-only check), whatever the config's log format."""
    socket_path = folder / VERIFY_SOCKET
    result.contacted = lambda: contacted(socket_path)
    line = f"stats socket {socket_path} mode 600 level admin  # {MARK}: what was contacted"
    glob = next((s for s in config.sections if s.kind == "global"), None)
    if glob is not None:
        edit.insert_after(glob.line, [line])
    else:
        edit.insert_after(0, [f"global  # {MARK}", f"    {line}"], indent="")


class _Files:
    """Pattern and map files the config names, as they run here (copied, or a stand-in)."""

    def __init__(self, config: HaproxyConfig, folder: Path, route_path: str, host: str | None) -> None:
        self.config, self.folder, self.route_path, self.host = config, folder, route_path, host
        self.written: dict[str, tuple[str, str, Path]] = {}
        self.placed: dict[tuple[str, str], Path] = {}

    def relocate(self, raw: str, key: str, statement: Statement, note) -> str:
        text = raw[raw.index(key):] if key in raw else " ".join(statement.words)
        words = statement.words
        for index, word in enumerate(words[:-1]):
            if word == "-f":
                braces = [at for at, w in enumerate(words[:index]) if w.lstrip("!") == "{"]
                fetch = words[braces[-1] + 1] if braces else words[2] if words[0] == "acl" else ""
                method = words[words.index("-m") + 1] if "-m" in words[:-1] else None
                text = text.replace(words[index + 1], str(self.place(words[index + 1], "acl", fetch, method,
                                                                      "-M" in words, note)), 1)
        for found in _FILE_REF.finditer(" ".join(words)):
            text = text.replace(found[2], str(self.place(found[2], "map", "", None, True, note)), 1)
        return text

    def reply(self, text: str, words: list[str], note) -> str:
        """A `return` rule's payload file, found beside the config; else an empty payload (for
        `errorfile`, a bare response of the rule's status) stands in, and a note says so."""
        for index, word in enumerate(words[:-1]):
            if word not in REPLY_FILES:
                continue
            name = words[index + 1]
            found = acl.pattern_file(name, self.config.file.parent)
            if found is not None:
                placed = self.copy(name, found)
            else:
                status = words[words.index("status") + 1] if "status" in words[:-1] else "200"
                placed = self.copy(name, None, f"HTTP/1.0 {status} \r\ncontent-length: 0\r\n\r\n"
                                   if word == "errorfile" else "")
                note(f"{name} is not beside the config: an empty reply stands in for it (the rule is "
                     "kept: HAProxy still answers what it answers)")
            text = text.replace(name, str(placed), 1)
        return text

    def copy(self, name: str, found: Path | None, stand_in: str = "", kind: str = "file") -> Path:
        """`found` (or, when it is None, the stand-in) as a file of the run, once per name and kind."""
        if (name, kind) not in self.placed:
            target = self.folder / "conf" / "files" / f"{len(self.placed)}-{Path(name).name}"
            if found is not None:
                content = found.read_text(errors="replace")
                self.written[str(found)] = (content, content, target)
            else:
                self.written[f"{name} (not here: a stand-in)"] = ("", stand_in, target)
            self.placed[(name, kind)] = target
        return self.placed[(name, kind)]

    def place(self, name: str, kind: str, fetch: str, method: str | None, as_map: bool, note) -> Path:
        if (name, kind) in self.placed:
            return self.placed[(name, kind)]
        found = acl.pattern_file(name, self.config.file.parent)
        if found is None:
            note(f"{name} is not beside the config: " + (
                "an empty map stands in for it (its default is used, as the reading judged)" if kind == "map"
                else "a stand-in that matches the judged request is used (the reading took the ACL as true)"))
        return self.copy(name, found, "" if found else self._stand_in(kind, fetch, method, as_map), kind)

    def _stand_in(self, kind: str, fetch: str, method: str | None, as_map: bool) -> str:
        if kind == "map":
            return ""
        request = acl.Request(self.route_path, self.host, self.config.file.parent)
        taken = acl.sample(fetch, request)
        if taken is None or taken[1] is None:
            return ""
        value, method = taken[1], method or taken[2]
        line = {"reg": re.escape(value), "len": str(len(value))}.get(method, value)
        return f"{line} x\n" if as_map else f"{line}\n"


def _fd_hard_limit() -> int:
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return hard if hard != resource.RLIM_INFINITY else 1 << 20


def _fd_allowed() -> int:
    """The largest maxconn HAProxy can raise its open-file limit for here (two fds a connection)."""
    return max(256, (_fd_hard_limit() - 200) // 2)


def _server(statement: Statement, lab_port: int, config: HaproxyConfig) -> str:
    words = statement.words
    if words[0] == "default-server":
        return " ".join(["default-server", *_drop_server_params(words[1:])])
    if len(words) < (4 if words[0] == "server-template" else 3):
        usage = "server-template PREFIX NUM ADDRESS:PORT" if words[0] == "server-template" else "server NAME ADDRESS"
        raise UnusableInput(f"{words[0]} needs a name and an address ({usage})", file=display_path(config.file),
                            line=statement.line)
    if words[0] == "server-template":  # server-template PREFIX COUNT FQDN:PORT params: the lab's, COUNT times
        return " ".join(["server-template", words[1], words[2], f"127.0.0.1:{lab_port}",
                         *_drop_server_params(words[4:])])
    return " ".join(["server", words[1], f"127.0.0.1:{lab_port}", *_drop_server_params(words[3:])])


def _drop_server_params(params: list[str]) -> list[str]:
    kept, skip = [], False
    for word in params:
        if skip:
            skip = False
        elif word in SERVER_DROPPED_FLAGS:
            continue
        elif word in SERVER_DROPPED_WITH_VALUE:
            skip = True
        else:
            kept.append(word)
    return kept


def _keep(params: list[str], allowed: tuple[str, ...]) -> list[str]:
    kept = []
    for index, word in enumerate(params):
        if word in allowed and index + 1 < len(params):
            kept += [word, params[index + 1]]
    return kept


def _keep_socket_params(params: list[str]) -> list[str]:
    return _keep(params, ("mode", "level", "expose-fd"))


_ADDRESS = re.compile(r"^(?:ipv4@|ipv6@)?(\[[^\]]+\]|[^:]*):?(\d*)$")


def addresses(text: str) -> list[tuple[str, str]]:
    """Every network address the rewritten config names (bind, server, log, nameserver, peer)."""
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        words = words_of(raw)
        if not words:
            continue
        target = None
        if words[0] == "bind" and len(words) > 1:
            target = words[1].split(",")[0]
        elif words[0] in ("server", "nameserver", "peer", "mailer") and len(words) > 2:
            target = words[2]
        elif words[0] == "server-template" and len(words) > 3:
            target = words[3]
        elif words[0] == "log" and len(words) > 1 and words[1] not in ("global", "stdout", "stderr") \
                and not words[1].startswith("/"):
            target = words[1]
        if target is not None and not target.startswith(("unix@", "/", "abns@")):
            match = _ADDRESS.match(target)
            host = (match[1] if match else target) or "*"
            found.append((f"line {number}", host))
    return found


def contacted(socket_path: Path) -> set[str]:
    """`show stat` on HAProxy's stats socket: the address of every server with a session."""
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)
            sock.connect(str(socket_path))
            sock.sendall(b"show stat\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return set()
    rows = list(csv.DictReader(b"".join(chunks).decode(errors="replace").lstrip("# ").splitlines()))
    return {row["addr"] for row in rows if row.get("svname") not in ("FRONTEND", "BACKEND")
            and row.get("addr") and int(row.get("stot") or 0) > 0}
