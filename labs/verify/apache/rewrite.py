"""Rewrite a user's Apache config to run here, in front of the lab's server (see labs.verify.rewrite).

Every file read is copied under the run's folder (each Include re-pointed to the copies it reads;
one whose file is not here is left out and said), `Listen` and `<VirtualHost>` addresses move to
free loopback ports (one per port the config used), every ProxyPass / ProxyPassMatch /
ProxyPassReverse / BalancerMember / `<Proxy>` / RewriteRule [P] target becomes the lab's server
(its path kept), TLS is dropped (the SSL* directives go: the lab speaks plain HTTP to the same
VirtualHost), PidFile, logs, DefaultRuntimeDir and Mutex move into the folder, ServerRoot goes
(the folder is the ServerRoot, `-d`), LoadModule loads this machine's module of that name,
User/Group go when not root, ProxyRemote goes (no other proxy is contacted).
"""
from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

from labs.verify.apache import routes
from labs.verify.apache.config import ApacheConfig, Directive, _Reader
from labs.verify.apache.platforms import BUILT_IN
from labs.verify import records
from labs.verify.edits import MARK, TextEdits
from labs.verify.rewrite import Rewritten
from proxies.apache.settings import MODULES_DIR
from server.processes import free_port

NO_TLS = "TLS is off here: the lab speaks plain HTTP to this VirtualHost"
TARGETS = ("proxypass", "proxypassmatch", "proxypassreverse", "balancermember")
_URL = re.compile(r"^(?:unix:[^|]*\|)?([a-z0-9+]+)://(\[[^\]]*\]|[^/:]*)(:\d+)?(.*)$", re.I)


class _Edits(TextEdits):
    def replace_directive(self, d: Directive, new: str) -> None:
        """Replace a directive through its last continued line (TextEdits.replace stops at the first)."""
        start = self._line_start(d.line)
        found = re.compile(rf"(?<![\w<-]){re.escape(d.name)}(?![\w-])|<{re.escape(d.name)}(?![\w-])").search(
            self.original, start)
        end = self.original.find("\n", self._line_start(d.last_line or d.line))
        at = found.start() if found else start
        gap = re.match(r"<?[\w-]+([ \t]+)", self.original[at:])
        if gap and new.startswith(d.name + " ") and "\n" not in new:  # keep the user's alignment
            new = d.name + gap[1] + new[len(d.name) + 1:]
        self._edits.append((at, len(self.original) if end < 0 else end, new))

    def drop(self, d: Directive, why: str) -> None:
        self.replace_directive(d, f"# {d.text()}  # {MARK}: {why}")


def target(url: str, lab_port: int) -> str:
    """The same URL with the lab's server as its host (a balancer:// name kept: its members move)."""
    found = _URL.match(url)
    if found is None or found[1].lower() == "balancer":
        return url
    return f"http://127.0.0.1:{lab_port}{found[4]}"


UPSTREAM_LOGLEVEL = "proxy:debug"  # mod_proxy's AH02824 line for every backend connection
UPSTREAM_CONNECTED = r"AH02824: \S+ connection established with \S+ \(" + records.ADDRESS + r"\)"


def contacted(folder: Path) -> set[str]:
    return records.addresses(UPSTREAM_CONNECTED, records.log_text(folder, "error.log"))


def rewrite(config: ApacheConfig, choice: routes.Choice, lab_port: int, folder: Path, *,
            drop_user: bool = False) -> Rewritten:
    conf = folder / "conf"

    shipped = str(config.platform.folder) + os.sep if config.platform else None

    def mirror(file: str) -> Path:
        if shipped and file.startswith(shipped):  # the platform's files sit in the ServerRoot (-d) as
            return folder / os.path.relpath(file, shipped)  # in /etc/apache2: its relative includes hold
        return conf / os.path.abspath(file).lstrip("/")

    def platform_own(d: Directive) -> bool:
        found = config.included.get(id(d), [])
        return bool(shipped) and d.file.startswith(shipped) and not os.path.isabs(d.args[0]) and \
            all(f.startswith(shipped) for f in found)

    edits = {file: _Edits(Path(file).read_text(), terminator="\n") for file in config.files}
    main_file = config.files[0]
    result = Rewritten("apache", folder, mirror(main_file), listen_port=0, labels=dict(config.labels),
                       host_header=choice.host, contacted=lambda: contacted(folder))
    ports: dict[str, int] = {}
    listened: set[str] = set()
    notes: list[str] = []

    def note(text: str) -> None:
        if text not in notes:
            notes.append(text)

    def port_for(port: str) -> int:
        return ports.setdefault(port, free_port())

    missing = {id(d) for d in config.missing}
    for d in config.main.walk(every=True):
        edit, key = edits[d.file], d.key
        if key in ("include", "includeoptional") and d.args:
            if d is config.site_include and d.line == 0:
                edit.insert_after(len(edit.original.splitlines()), [f"# {MARK}: the site file",
                                                                     f'IncludeOptional "{mirror(config.entry)}"'], indent="")
            elif d is not config.site_include and platform_own(d):
                continue
            elif id(d) in missing:
                edit.drop(d, "not here: left out (see the notes)")
            elif not config.included.get(id(d)):
                edit.drop(d, "no file matches here")
            else:
                edit.replace_directive(d, "\n".join(f'{d.name} "{mirror(f)}"' for f in config.included[id(d)]))
        elif key == "serverroot":
            edit.drop(d, "the run folder is the ServerRoot (-d)")
        elif key == "loadmodule" and len(d.args) > 1:
            here = os.path.join(MODULES_DIR, os.path.basename(d.args[1]))
            if d.args[0] in BUILT_IN:
                edit.drop(d, "compiled into this apache2")
            elif not os.path.isfile(here):
                edit.drop(d, "this module is not installed here")
                note(f"the module {d.args[0]} ({d.where}) is not installed here: directives that need it fail the check")
            elif here != d.args[1]:
                edit.replace_directive(d, f"{d.name} {d.args[0]} {here}")
        elif key == "listen" and d.args:
            port = d.args[0].rsplit(":", 1)[-1]
            if d.active:
                listened.add(port)
            edit.replace_directive(d, f"{d.name} 127.0.0.1:{port_for(port)}")
            if len(d.args) > 1 and d.args[1].lower() == "https":
                note(NO_TLS)
        elif key == "virtualhost" and d.block is not None:
            addrs = []
            for addr in d.args:
                found = re.search(r":(\d+)$", addr)
                addrs.append(f"127.0.0.1:{port_for(found[1])}" if found else "127.0.0.1")
            edit.replace_directive(d, f"<{d.name} {' '.join(addrs)}>")
        elif key in TARGETS and d.args:
            urls = [i for i, a in enumerate(d.args) if _URL.match(a)]
            if urls:
                args = list(d.args)
                args[urls[0]] = target(args[urls[0]], lab_port)
                edit.replace_directive(d, " ".join([d.name, *(_quoted(a) for a in args)]))
        elif key == "proxy" and d.block is not None and d.args and _URL.match(d.args[0]):
            edit.replace_directive(d, f'<{d.name} "{target(d.args[0], lab_port)}">')
        elif key == "rewriterule" and len(d.args) > 2 and routes._proxy_flag(d):
            args = [d.args[0], target(d.args[1], lab_port), *d.args[2:]]
            edit.replace_directive(d, " ".join([d.name, *(_quoted(a) for a in args)]))
        elif key.startswith("ssl"):
            edit.drop(d, "TLS is off here")
            if key == "sslengine":
                note(NO_TLS)
        elif key == "pidfile":
            edit.replace_directive(d, f"{d.name} {folder / 'httpd.pid'}")
        elif key == "errorlog":
            edit.replace_directive(d, f"{d.name} {folder / 'error.log'}")
        elif key == "loglevel" and d.args:
            # mod_proxy says "AH02824: connection established with host:port (address)" at debug:
            # the address each backend connection really went to, what loopback-only reads.
            edit.replace_directive(d, " ".join([d.name, *d.args, UPSTREAM_LOGLEVEL]))
        elif key in ("customlog", "transferlog") and d.args:
            edit.replace_directive(d, " ".join([d.name, str(folder / "access.log"), *map(_quoted, d.args[1:])]))
        elif key == "defaultruntimedir":
            edit.replace_directive(d, f"{d.name} {folder}")
        elif key == "mutex":
            names = [a for a in d.args if ":" not in a and a not in ("default", "file", "none", "sem", "flock",
                                                                     "fcntl", "posixsem", "pthread", "sysvsem")]
            edit.replace_directive(d, f"{d.name} file:{folder} {' '.join(names) or 'default'}")
        elif key in ("scoreboardfile", "coredumpdirectory", "proxyremote", "proxyremotematch"):
            edit.drop(d, "names a path or proxy of the machine it was written for")
        elif key in ("user", "group") and d.args and (drop_user or os.geteuid() != 0 or not _exists(key, d.args[0])):
            edit.drop(d, "runs as the invoking user in a container" if drop_user else
                      "not root here" if os.geteuid() != 0 else f"no such {key} here")
    _listen(config, choice, edits, ports, listened, result, port_for)
    defines = config.platform.defines if config.platform else {}
    if defines:
        values = {**defines, "APACHE_PID_FILE": str(folder / "httpd.pid")}
        values.update({k: str(folder) for k in values if k.endswith("_DIR")})
        edits[main_file].insert_after(0, [f"# {MARK}: what the platform's envvars export, pointed at the run",
                                          *(f"Define {k} {v}" for k, v in values.items())], indent="")
    edits[main_file].insert_after(len(edits[main_file].original.splitlines()), [
        f"# {MARK}: every backend connection logged (loopback-only)", f"LogLevel {UPSTREAM_LOGLEVEL}"], indent="")
    for file in config.files:
        result.files[file] = (edits[file].original, edits[file].apply(), mirror(file))
    result.notes += notes
    return result


def _listen(config: ApacheConfig, choice: routes.Choice, edits: dict, ports: dict[str, int], listened: set[str],
            result: Rewritten, port_for) -> None:
    """The judged server's port: its VirtualHost's (a Listen added when none opens it, as for a
    :443 VirtualHost whose Listen is in `<IfModule ssl_module>`), else the first Listen's."""
    wanted = routes.vhost_port(choice.vhost)
    if wanted is None:
        wanted = next(iter(sorted(listened, key=list(ports).index)), None)
    if wanted is not None and wanted in listened:
        result.listen_port = ports[wanted]
        return
    port = port_for(wanted or "80")
    result.listen_port = port
    at = choice.vhost if choice.vhost is not None else None
    lines = [f"# {MARK}: nothing listened on the judged server's port here", f"Listen 127.0.0.1:{port}"]
    if at is not None:
        edits[at.file].insert_after(at.line - 1, lines, indent="")
    else:
        edits[config.files[0]].insert_after(0, lines, indent="")


def addresses(main: Path) -> list[tuple[str, str]]:
    """(where, host) for every address the written config names (include the inactive blocks)."""
    config = _Reader(str(main), str(main), None).read()
    found = []
    for d in config.main.walk(every=True):
        if d.key == "listen" and d.args:
            host = d.args[0].rsplit(":", 1)[0] if ":" in d.args[0] else "0.0.0.0"
            found.append((d.where, host))
        elif d.key == "virtualhost":
            found += [(d.where, a.rsplit(":", 1)[0] if ":" in a else a) for a in d.args]
        elif d.key in (*TARGETS, "rewriterule", "proxy", "proxyremote", "proxyremotematch"):
            found += [(d.where, m[2]) for a in d.args if (m := _URL.match(a)) and m[1].lower() != "balancer"]
    return found


def _quoted(arg: str) -> str:
    return f'"{arg}"' if not arg or any(c.isspace() for c in arg) else arg


def _exists(key: str, name: str) -> bool:
    import grp
    try:
        (pwd.getpwnam if key == "user" else grp.getgrnam)(name.lstrip("#") if not name.startswith("#") else "root")
        return True
    except KeyError:
        return False
