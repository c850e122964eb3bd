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
import shutil
from pathlib import Path
from typing import Callable, Iterator

from labs.verify.apache import routes
from labs.verify.apache.config import ApacheConfig, Directive, tokenize
from labs.verify.apache.platforms import BUILT_IN
from labs.verify import records
from labs.verify.edits import MARK, TextEdits
from labs.verify.modsecurity import DATA_FILES
from labs.verify.plan import RunPlan, handler_for, reason
from labs.verify.rewrite import FAILS_THE_CHECK, Rewritten
from proxies.apache.settings import MODULES_DIR
from server.processes import free_port

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


class _Run:
    """One rewrite under way: the plan, the edits per file, the ports given out, what it noted."""

    def __init__(self, config: ApacheConfig, plan: RunPlan) -> None:
        self.config, self.plan, self.folder = config, plan, plan.folder
        self.shipped = str(config.platform.folder) + os.sep if config.platform else None
        self.edits = {file: _Edits(Path(file).read_text(), terminator="\n") for file in config.files}
        self.missing = {id(d) for d in config.missing}
        self.ports: dict[str, int] = {}
        self.listened: set[str] = set()
        self.notes: list[str] = []

    def mirror(self, file: str) -> Path:
        if self.shipped and file.startswith(self.shipped):  # the platform's files sit in the ServerRoot (-d)
            return self.folder / os.path.relpath(file, self.shipped)  # as in /etc/apache2: its relative includes hold
        return self.folder / "conf" / os.path.abspath(file).lstrip("/")

    def platform_own(self, d: Directive) -> bool:
        found = self.config.included.get(id(d), [])
        return bool(self.shipped) and d.file.startswith(self.shipped) and not os.path.isabs(d.args[0]) and \
            all(f.startswith(self.shipped) for f in found)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def port_for(self, port: str) -> int:
        return self.ports.setdefault(port, free_port())

    def drop(self, d: Directive, key: str) -> None:
        self.edits[d.file].drop(d, reason(key))

    def replace(self, d: Directive, new: str) -> None:
        self.edits[d.file].replace_directive(d, new)


def _include(d: Directive, run: _Run) -> None:
    if not d.args:
        return
    config = run.config
    if d is config.site_include and d.line == 0:
        edit = run.edits[d.file]
        edit.insert_after(len(edit.original.splitlines()), [f"# {MARK}: the site file",
                                                            f'IncludeOptional "{run.mirror(config.entry)}"'], indent="")
    elif d is not config.site_include and run.platform_own(d):
        return
    elif id(d) in run.missing:
        run.drop(d, "include-missing")
    elif not config.included.get(id(d)):
        run.drop(d, "include-no-match")
    else:
        run.replace(d, "\n".join(f'{d.name} "{run.mirror(f)}"' for f in config.included[id(d)]))


def _load_module(d: Directive, run: _Run) -> None:
    if len(d.args) < 2:
        return
    here = os.path.join(MODULES_DIR, os.path.basename(d.args[1]))
    if d.args[0] in BUILT_IN:
        run.drop(d, "apache-built-in")
    elif not os.path.isfile(here):
        run.drop(d, "module-missing")
        run.note(f"the module {d.args[0]} ({d.where}) is not installed here: {FAILS_THE_CHECK}")
    elif here != d.args[1]:
        run.replace(d, f"{d.name} {d.args[0]} {here}")


def _listen_directive(d: Directive, run: _Run) -> None:
    if not d.args:
        return
    port = d.args[0].rsplit(":", 1)[-1]
    if d.active:
        run.listened.add(port)
    run.replace(d, f"{d.name} 127.0.0.1:{run.port_for(port)}")
    if len(d.args) > 1 and d.args[1].lower() == "https":
        run.note(reason("apache-tls-off"))


def _virtual_host(d: Directive, run: _Run) -> None:
    if d.block is None:
        return
    addrs = []
    for addr in d.args:
        found = re.search(r":(\d+)$", addr)
        addrs.append(f"127.0.0.1:{run.port_for(found[1])}" if found else "127.0.0.1")
    run.replace(d, f"<{d.name} {' '.join(addrs)}>")


def _target(d: Directive, run: _Run) -> None:
    urls = [i for i, a in enumerate(d.args) if _URL.match(a)]
    if urls:
        args = list(d.args)
        args[urls[0]] = target(args[urls[0]], run.plan.upstream_port(_member_index(d)))
        run.replace(d, " ".join([d.name, *(_quoted(a) for a in args)]))


def _member_index(d: Directive) -> int:
    """A BalancerMember's place among its `<Proxy balancer://>`'s (replica k under `verify --mcp`)."""
    if d.key != "balancermember" or d.parent is None:
        return 0
    return d.parent.children("balancermember").index(d)


def _proxy_section(d: Directive, run: _Run) -> None:
    if d.block is not None and d.args and _URL.match(d.args[0]):
        run.replace(d, f'<{d.name} "{target(d.args[0], run.plan.lab_port)}">')


def _rewrite_rule(d: Directive, run: _Run) -> None:
    if len(d.args) > 2 and routes._proxy_flag(d):
        args = [d.args[0], target(d.args[1], run.plan.lab_port), *d.args[2:]]
        run.replace(d, " ".join([d.name, *(_quoted(a) for a in args)]))


def _ssl(d: Directive, run: _Run) -> None:
    run.drop(d, "apache-tls-off")
    if d.key == "sslengine":
        run.note(reason("apache-tls-off"))


def _log_level(d: Directive, run: _Run) -> None:
    # mod_proxy says "AH02824: connection established with host:port (address)" at debug: the
    # address each backend connection really went to, what loopback-only reads.
    if d.args:
        run.replace(d, " ".join([d.name, *d.args, UPSTREAM_LOGLEVEL]))


def _custom_log(d: Directive, run: _Run) -> None:
    if d.args:
        run.replace(d, " ".join([d.name, str(run.folder / "access.log"), *map(_quoted, d.args[1:])]))


def _mutex(d: Directive, run: _Run) -> None:
    names = [a for a in d.args if ":" not in a and a not in ("default", "file", "none", "sem", "flock",
                                                             "fcntl", "posixsem", "pthread", "sysvsem")]
    run.replace(d, f"{d.name} file:{run.folder} {' '.join(names) or 'default'}")


def _user(d: Directive, run: _Run) -> None:
    if not d.args:
        return
    if run.plan.in_container:
        run.drop(d, "user-in-container")
    elif os.geteuid() != 0:
        run.drop(d, "user-not-root")
    elif not _exists(d.key, d.args[0]):
        run.edits[d.file].drop(d, f"no such {d.key} here")


def _in_folder(name: str) -> Callable[[Directive, _Run], None]:
    """A directive whose one argument is a path of the run: `name` in the run's folder ("" the folder)."""
    def handle(d: Directive, run: _Run) -> None:
        run.replace(d, f"{d.name} {run.folder / name if name else run.folder}")
    return handle


def _rule_data_files(run: _Run) -> list[tuple[Path, Path]]:
    """(the original, its copy) of every data file the config's ModSecurity rules read."""
    found = {}
    for file in run.config.files:
        folder = Path(file).resolve().parent
        for name in DATA_FILES.findall(run.edits[file].original):
            if (folder / name).is_file():
                found[folder / name] = run.mirror(str(Path(file).parent / name))
    return list(found.items())


def _dropped(key: str) -> Callable[[Directive, _Run], None]:
    return lambda d, run: run.drop(d, key)


# Keyed as httpd reads them, case-blind (Directive.key is lower-case).
HANDLERS: dict[str, Callable[[Directive, _Run], None]] = {
    "include": _include, "includeoptional": _include,
    "serverroot": _dropped("apache-server-root"),
    "loadmodule": _load_module,
    "listen": _listen_directive,
    "virtualhost": _virtual_host,
    **{key: _target for key in TARGETS},
    "proxy": _proxy_section,
    "rewriterule": _rewrite_rule,
    "ssl*": _ssl,
    "pidfile": _in_folder("httpd.pid"),
    "errorlog": _in_folder("error.log"),
    "loglevel": _log_level,
    "customlog": _custom_log, "transferlog": _custom_log,
    "defaultruntimedir": _in_folder(""),
    "mutex": _mutex,
    **{key: _dropped("machine-path") for key in ("scoreboardfile", "coredumpdirectory", "proxyremote",
                                                 "proxyremotematch")},
    "user": _user, "group": _user,
    # ModSecurity's own logs go into the run's folder.
    "secauditlog": _in_folder("modsec_audit.log"), "secdebuglog": _in_folder("modsec_debug.log"),
}
# What the rewrite keeps as written: the streaming settings verify judges, and what is harmless
# here (names, access rules, headers, limits, log formats, sections that only group).
KEPT = frozenset({
    "location", "locationmatch", "directory", "directorymatch", "files", "filesmatch", "ifmodule", "ifdefine",
    "ifversion", "if", "elseif", "else", "proxypassreverse", "proxypreservehost", "proxyrequests", "proxyset",
    "proxyiobuffersize", "proxytimeout", "timeout", "keepalive", "keepalivetimeout", "maxkeepaliverequests",
    "requestreadtimeout", "limitrequestbody", "limitrequestfields", "addoutputfilterbytype", "setoutputfilter",
    "removeoutputfilterbytype", "setenv", "unsetenv", "setenvif", "setenvifnocase", "browsermatch", "header",
    "requestheader", "require", "allow", "deny", "order", "errordocument", "logformat", "servername", "serveralias",
    "serveradmin", "serversignature", "servertokens", "rewriteengine", "rewritecond", "maxrequestworkers",
    "maxclients", "serverlimit", "threadsperchild", "startservers", "minsparethreads", "maxsparethreads",
    "maxconnectionsperchild", "documentroot", "options", "allowoverride", "directoryindex", "define",
    "balancermember", "h2direct", "protocols", "hostnamelookups", "usecanonicalname", "addtype", "adddefaultcharset",
})
# ModSecurity's engine, limits and rules (the fixed config's WAF block, the OWASP rule set it
# includes) run as written: its logs go to the run's folder (above), its rules' data files beside them.
KEPT |= frozenset({
    "secruleengine", "secrequestbodyaccess", "secrequestbodylimit", "secrequestbodynofileslimit",
    "secrequestbodyinmemorylimit", "secrequestbodylimitaction", "secresponsebodyaccess", "secresponsebodylimit",
    "secresponsebodylimitaction", "secresponsebodymimetype", "secresponsebodymimetypesclear", "secdatadir",
    "sectmpdir", "secauditengine", "secauditlogparts", "secauditlogrelevantstatus", "secauditlogtype", "secrule",
    "secaction", "secmarker", "secdefaultaction", "seccollectiontimeout", "seccomponentsignature",
})


def rewrite(config: ApacheConfig, served: routes.Served, host: str | None, plan: RunPlan) -> Rewritten:
    run = _Run(config, plan)
    folder = plan.folder
    result = Rewritten("apache", folder, run.mirror(config.files[0]), listen_port=0, labels=dict(config.labels),
                       host_header=host, contacted=lambda: contacted(folder))
    for d in config.main.walk(every=True):
        handler = handler_for(HANDLERS, d.key)
        if handler is not None:
            handler(d, run)
    edits, main_file = run.edits, config.files[0]
    _listen(config, served, edits, run.ports, run.listened, result, run.port_for)
    defines = config.platform.defines if config.platform else {}
    if defines:
        values = {**defines, "APACHE_PID_FILE": str(folder / "httpd.pid")}
        values.update({k: str(folder) for k in values if k.endswith("_DIR")})
        edits[main_file].insert_after(0, [f"# {MARK}: what the platform's envvars export, pointed at the run",
                                          *(f"Define {k} {v}" for k, v in values.items())], indent="")
    edits[main_file].insert_after(len(edits[main_file].original.splitlines()), [
        f"# {MARK}: every backend connection logged (loopback-only)", f"LogLevel {UPSTREAM_LOGLEVEL}",
        *_server_defaults(config, folder, defines)], indent="")
    for file in config.files:
        result.files[file] = (edits[file].original, edits[file].apply(), run.mirror(file))
    result.on_write += [lambda original=original, copy=copy: _copy(original, copy)
                        for original, copy in _rule_data_files(run)]
    result.notes += run.notes
    return result


def _server_defaults(config: ApacheConfig, folder: Path, defines: dict) -> list[str]:
    """The main error log and pid file where the config names none: httpd's compiled-in defaults
    are `logs/error_log` under the ServerRoot (the run's folder has no logs/: "AH02291: Cannot
    access directory", the config refused) and Debian's `/run/apache2.pid` (two runs at once:
    "httpd already running"). A platform's envvars (`defines`) name both already."""
    if defines:
        return []
    named = {d.key for d in config.main.children()}
    lines = []
    if "errorlog" not in named:
        lines += [f"# {MARK}: the config names no ErrorLog; httpd's default is logs/ under the ServerRoot",
                  f'ErrorLog "{folder / "error.log"}"']
    if "pidfile" not in named:
        lines += [f"# {MARK}: the config names no PidFile; httpd's default is one file for every httpd",
                  f'PidFile "{folder / "httpd.pid"}"']
    return lines


def _copy(original: Path, copy: Path) -> None:
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(original, copy)


def _listen(config: ApacheConfig, served: routes.Served, edits: dict, ports: dict[str, int], listened: set[str],
            result: Rewritten, port_for) -> None:
    """The judged server's port: its VirtualHost's (a Listen added when none opens it, as for a
    :443 VirtualHost whose Listen is in `<IfModule ssl_module>`), else the first Listen's."""
    wanted = routes.vhost_port(served.vhost)
    if wanted is None:
        wanted = next(iter(sorted(listened, key=list(ports).index)), None)
    if wanted is not None and wanted in listened:
        result.listen_port = ports[wanted]
        return
    port = port_for(wanted or "80")
    result.listen_port = port
    at = served.vhost
    lines = [f"# {MARK}: nothing listened on the judged server's port here", f"Listen 127.0.0.1:{port}"]
    if at is not None:
        edits[at.file].insert_after(at.line - 1, lines, indent="")
    else:
        edits[config.files[0]].insert_after(0, lines, indent="")


def addresses(rewritten: Rewritten) -> list[tuple[str, str]]:
    """(where, host) for every address the rewritten files name, inactive blocks included."""
    found = []
    for _, text, path in rewritten.files.values():
        for d in _walk(tokenize(str(path), text)):
            if d.key == "listen" and d.args:
                host = d.args[0].rsplit(":", 1)[0] if ":" in d.args[0] else "0.0.0.0"
                found.append((d.where, host))
            elif d.key == "virtualhost":
                found += [(d.where, a.rsplit(":", 1)[0] if ":" in a else a) for a in d.args]
            elif d.key in (*TARGETS, "rewriterule", "proxy", "proxyremote", "proxyremotematch"):
                found += [(d.where, m[2]) for a in d.args if (m := _URL.match(a)) and m[1].lower() != "balancer"]
    return found


def _walk(directives: list[Directive]) -> Iterator[Directive]:
    for d in directives:
        yield d
        yield from _walk(d.block or [])


def _quoted(arg: str) -> str:
    return f'"{arg}"' if not arg or any(c.isspace() for c in arg) else arg


def _exists(key: str, name: str) -> bool:
    import grp
    try:
        (pwd.getpwnam if key == "user" else grp.getgrnam)(name.lstrip("#") if not name.startswith("#") else "root")
        return True
    except KeyError:
        return False
