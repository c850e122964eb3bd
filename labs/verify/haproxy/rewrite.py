"""Rewrite a user's HAProxy config to run here, in front of the lab's server (see labs.verify.rewrite).

One handler per directive (`HANDLERS`, looked up by labs/verify/plan.py `handler_for`): `bind`
lines move to free loopback ports (the chat frontend's first), every `server` (and
`server-template`) points at the lab's server with TLS, DNS and health-check parameters dropped,
logs go to stdout, pid and stats sockets into the run's folder, `user`/`group`/`chroot`/`daemon`
go, and `resolvers`, `peers` and `mailers` sections are commented out (they name other hosts),
with what refers to them (`stick-table ... peers X`, a server's `resolvers X`, `do-resolve`).
A directive with no handler is kept as written (`KEPT` names those the fixed configs and the
streaming settings use), the files it names excepted: pattern and map files and the files of a
`return` rule or an `errorfile` are the run's copies (labs/verify/haproxy/files.py). `ssl` binds
keep TLS with a certificate made for the run (tls.py), and the chat frontend is measured on its
TLS bind when it has one, so a `redirect scheme https unless { ssl_fc }` is kept and holds as
deployed. When the config is written for another HAProxy version than the one here, that
version's defaults are written in where they differ (labs/verify/haproxy/versions.py).
Nothing is written here: the pipeline writes the result after its loopback check.
"""
from __future__ import annotations

import csv
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from labs.findings import UnusableInput
from labs.verify.edits import MARK, TextEdits
from labs.verify.haproxy import acl, tls, versions
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement, words_of
from labs.verify.haproxy.files import FILE_REF, REPLY_FILES, RunFiles
from labs.verify.haproxy.routes import Served
from labs.verify.model import display_path
from labs.verify.plan import RunPlan, handler_for, reason
from labs.verify.rewrite import Rewritten
from labs.verify.tls import bundle_at, run_bundle
from proxies.binaries import find_binary
from server.processes import free_port

BIND_KEPT = ("maxconn", "backlog", "name")
BIND_FLAGS_KEPT = ("tfo", "defer-accept")
SERVER_DROPPED_FLAGS = {"ssl", "check", "check-ssl", "no-check", "send-proxy", "send-proxy-v2", "no-verifyhost"}
SERVER_DROPPED_WITH_VALUE = {"verify", "ca-file", "crt", "sni", "resolvers", "init-addr", "resolve-prefer",
                             "resolve-net",
                             "alpn", "check-sni", "addr", "port", "inter", "fall", "rise", "resolve-opts",
                             "check-alpn", "ciphers", "verifyhost", "agent-check", "agent-port", "agent-inter"}
SERVER_DNS = ("resolvers", "init-addr", "resolve-prefer", "resolve-opts")
# A section naming other hosts, commented out whole: the reason for it (plan.REASONS).
REMOVED_SECTIONS = {"resolvers": "haproxy-resolvers", "peers": "haproxy-peers", "mailers": "haproxy-mailers"}
STDOUT_LOG = "log stdout format raw local0 info"
VERIFY_SOCKET = "verify-stats.sock"


@dataclass
class _Run:
    """One rewrite under way: the parse, the chosen frontend and request, the plan, the edits."""

    config: HaproxyConfig
    served: Served
    plan: RunPlan
    edit: TextEdits
    files: RunFiles
    result: Rewritten
    not_root: bool
    lines: list[str] = field(default_factory=list)  # the config's, as written
    bind_defaults: dict[int, list[str]] = field(default_factory=dict)  # the intended version's, by bind line
    made_bundle: bool = False

    def note(self, text: str) -> None:
        if text not in self.result.notes:
            self.result.notes.append(text)

    def bundle(self) -> Path:
        """The run's certificate and key in one file, made by `write()`, once."""
        if not self.made_bundle:
            self.made_bundle = True
            self.result.on_write.append(lambda: run_bundle(self.plan.folder))
        return bundle_at(self.plan.folder)

    def line(self, statement: Statement) -> str:
        return self.lines[statement.line - 1]


def rewrite(config: HaproxyConfig, served: Served, plan: RunPlan) -> Rewritten:
    """The config as it runs here, in memory: the chat frontend `served.frontend` reachable on
    `listen_port`, every server the lab's."""
    folder = plan.folder
    edit = TextEdits(config.text, terminator="\n")
    result = Rewritten("haproxy", folder, folder / "conf" / "haproxy.cfg", listen_port=0,
                       host_header=served.request.host)  # the Host the route's ACLs ask for
    run = _Run(config, served, plan, edit, RunFiles(config, folder, served.request), result,
               not_root=plan.in_container or os.geteuid() != 0, lines=config.text.splitlines())
    if plan.version is not None:
        binary = find_binary("haproxy", plan.series)
        run.bind_defaults = versions.intended_defaults(config, edit, versions.TABLE.parse(plan.version),
                                                       versions.TABLE.binary_version(binary), run.note)
    for section in config.sections:
        if section.kind in REMOVED_SECTIONS:
            why = reason(REMOVED_SECTIONS[section.kind])
            edit.remove(section.line, section.kind, why)
            for statement in section.statements:
                edit.remove(statement.line, statement.keyword, why)
            continue
        for statement in section.statements:
            handler = handler_for(HANDLERS, statement.keyword) or _references
            handler(run, section, statement)
    _add_stats_socket(config, edit, folder, result)
    result.files[str(config.file)] = (config.text, edit.apply(), result.main)
    result.files.update(run.files.written)
    return result


def directives(config: HaproxyConfig) -> list[str]:
    """Every directive the rewrite walks (a removed section's are commented out with it)."""
    return [statement.keyword for section in config.sections if section.kind not in REMOVED_SECTIONS
            for statement in section.statements]


# The handlers, one per directive: (the run, the section, the statement) -> the edit, if any.
Handler = Callable[[_Run, Section, Statement], None]


def _user(run: _Run, section: Section, statement: Statement) -> None:
    if section.kind == "global" and run.not_root:
        run.edit.remove(statement.line, statement.keyword,
                        reason("user-in-container" if run.plan.in_container else "user-not-root"))


def _tls_global(run: _Run, section: Section, statement: Statement) -> None:
    if section.kind == "global":
        run.edit.remove(statement.line, statement.keyword, reason(tls.GLOBALS_DROPPED[statement.keyword]))


def _foreground(run: _Run, section: Section, statement: Statement) -> None:
    run.edit.remove(statement.line, statement.keyword, reason("foreground"))


def _maxconn(run: _Run, section: Section, statement: Statement) -> None:
    words = statement.words
    if section.kind == "global" and words[1:2] and words[1].isdigit() and int(words[1]) > _fd_allowed():
        run.edit.replace(statement.line, "maxconn", f"maxconn {_fd_allowed()}")
        run.note(f"global maxconn {words[1]} needs about {2 * int(words[1])} open files; this machine "
                 f"allows {_fd_hard_limit()}, so it runs with maxconn {_fd_allowed()} here")


def _pidfile(run: _Run, section: Section, statement: Statement) -> None:
    run.edit.replace(statement.line, "pidfile", f"pidfile {run.plan.folder / 'haproxy.pid'}")


def _log(run: _Run, section: Section, statement: Statement) -> None:
    if statement.words[1:2] not in (["global"], ["stdout"]):
        run.edit.replace(statement.line, "log", STDOUT_LOG)


def _stats(run: _Run, section: Section, statement: Statement) -> None:
    words = statement.words
    if words[1:2] == ["socket"]:
        run.edit.replace(statement.line, "stats", " ".join(["stats socket", str(run.plan.folder / "stats.sock"),
                                                             *_keep(words[3:], ("mode", "level", "expose-fd"))]))


def _bind(run: _Run, section: Section, statement: Statement) -> None:
    words, result = statement.words, run.result
    port, secure = free_port(), tls.is_tls_bind(words)
    if section is run.served.frontend and (not result.listen_port or (secure and not result.tls)):
        # Deployed clients reach the chat route over TLS when the frontend offers it.
        result.listen_port, result.tls = port, secure
    params = _keep(words[2:], BIND_KEPT) + [w for w in words[2:] if w in BIND_FLAGS_KEPT]
    if secure:
        params += tls.bind_params(words, run.bundle(), run.note) + run.bind_defaults.get(statement.line, [])
        run.note(reason("tls-kept"))
    elif any(w in ("crt", "crt-list") for w in words):
        run.note("a bind with crt but no ssl speaks plain HTTP (as HAProxy runs it): its files are dropped")
    run.edit.replace(statement.line, "bind", " ".join(["bind", f"127.0.0.1:{port}", *params]))


def _server(run: _Run, section: Section, statement: Statement) -> None:
    words = statement.words
    servers = [s for s in section.statements if s.keyword in ("server", "server-template")]
    port = run.plan.upstream_port(servers.index(statement)) if statement in servers else run.plan.lab_port
    run.edit.replace(statement.line, statement.keyword, _server_line(statement, port, run.config))
    if "check" in words:
        run.note(reason("health-check"))
    if any(w in SERVER_DNS for w in words):
        run.note(reason("dns-off"))


def _stick_table(run: _Run, section: Section, statement: Statement) -> None:
    words = statement.words
    if "peers" in words[:-1]:
        at = words.index("peers")
        run.edit.replace(statement.line, "stick-table", " ".join(words[:at] + words[at + 2:]))
        run.note(f"stick-table without peers {words[at + 1]}: the peers section names other hosts")


def _reply_rule(run: _Run, section: Section, statement: Statement) -> None:
    """`http-request return ... file F`: the reply's file is the run's copy (or an empty stand-in)."""
    words = statement.words
    if words[1:2] == ["return"] and any(w in REPLY_FILES for w in words[:-1]) and not _resolves(words):
        text = run.files.relocate(run.line(statement), statement.keyword, statement, run.note)
        run.edit.replace(statement.line, statement.keyword, run.files.reply(text, words, run.note))
    else:
        _references(run, section, statement)


def _errorfile(run: _Run, section: Section, statement: Statement) -> None:
    words = statement.words
    if len(words) <= 2:
        return
    found = acl.pattern_file(words[2], run.config.file.parent)
    if found is not None:
        run.edit.replace(statement.line, "errorfile", f"errorfile {words[1]} {run.files.copy(words[2], found)}")
    else:
        run.edit.remove(statement.line, "errorfile", reason("haproxy-errorfile-missing"))


def _health_check(run: _Run, section: Section, statement: Statement) -> None:
    run.edit.remove(statement.line, "http-check", reason("health-check"))


def _option(run: _Run, section: Section, statement: Statement) -> None:
    if statement.words[1:2] == ["httpchk"]:
        run.edit.remove(statement.line, "option", reason("health-check"))


def _references(run: _Run, section: Section, statement: Statement) -> None:
    """A directive kept as written, but for what it names of the user's machine: a pattern file or
    a map is the run's copy (or a stand-in), and a `do-resolve` goes with its resolvers section."""
    words = statement.words
    if _resolves(words):
        run.edit.remove(statement.line, statement.keyword, reason("haproxy-do-resolve"))
    elif "-f" in words[:-1] or any(FILE_REF.search(w) for w in words):
        run.edit.replace(statement.line, statement.keyword,
                         run.files.relocate(run.line(statement), statement.keyword, statement, run.note))


def _resolves(words: list[str]) -> bool:
    return any("do-resolve(" in w for w in words)


HANDLERS: dict[str, Handler] = {
    **dict.fromkeys(("user", "group", "uid", "gid"), _user),
    **dict.fromkeys(tls.GLOBALS_DROPPED, _tls_global),
    **dict.fromkeys(("chroot", "daemon", "master-worker"), _foreground),
    "maxconn": _maxconn, "pidfile": _pidfile, "log": _log, "stats": _stats, "bind": _bind,
    **dict.fromkeys(("server", "default-server", "server-template"), _server),
    "stick-table": _stick_table,
    **dict.fromkeys(("http-request", "http-response", "http-after-response"), _reply_rule),
    "errorfile": _errorfile, "http-check": _health_check, "option": _option,
}
# Kept as written (the files they name excepted, see `_references`): how requests are routed and
# answered, and the streaming settings the user wrote, which are what verify measures.
KEPT = frozenset({
    "mode", "timeout", "compression", "balance", "hash-type", "http-reuse", "retries", "retry-on",
    "acl", "use_backend", "default_backend", "use-server", "redirect", "tcp-request", "tcp-response",
    "http-error", "errorloc", "errorloc302", "errorloc303", "capture", "cookie", "stick", "fullconn",
    "description", "unique-id-format", "unique-id-header", "log-format", "monitor-uri", "nbthread",
    "tune.bufsize", "tune.maxrewrite", "tune.h2.initial-window-size", "tune.ssl.default-dh-param",
    "ssl-default-bind-ciphers", "ssl-default-bind-ciphersuites", "ssl-default-bind-options",
    "ssl-default-server-ciphers", "ssl-default-server-ciphersuites", "ssl-default-server-options",
})


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


def _fd_hard_limit() -> int:
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return hard if hard != resource.RLIM_INFINITY else 1 << 20


def _fd_allowed() -> int:
    """The largest maxconn HAProxy can raise its open-file limit for here (two fds a connection)."""
    return max(256, (_fd_hard_limit() - 200) // 2)


def _server_line(statement: Statement, lab_port: int, config: HaproxyConfig) -> str:
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


_ADDRESS = re.compile(r"^(?:ipv4@|ipv6@)?(\[[^\]]+\]|[^:]*):?(\d*)$")


def addresses(rewritten: Rewritten) -> list[tuple[str, str]]:
    """Every network address the rewritten config names (bind, server, log, nameserver, peer)."""
    text = next(new for _, new, path in rewritten.files.values() if path == rewritten.main)
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
