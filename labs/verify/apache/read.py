"""What is in effect on the Apache rule that serves the chat route (labs/verify/apache/routes.py
finds it), with httpd 2.4's defaults where nothing sets a directive.

Server-wide directives (`Timeout`, `ProxyTimeout`, `ProxyIOBufferSize`) are read from the
VirtualHost, else the main server; per-directory ones (`SetOutputFilter`, `AddOutputFilterByType`,
`SetEnv`) from the server levels and then every `<Location>` that applies, the last one winning;
the ProxyPass keys from the rule itself (or its balancer's members and `ProxySet`); the MPM limits
from the main server. Each default links to its documentation (`DOCS`).
"""
from __future__ import annotations

from labs.verify.apache.config import ApacheConfig, Directive
from labs.verify.apache.routes import Rule, Served
from labs.verify.model import DEFAULT, Reading, Setting
from labs.verify.modsecurity import judged
from labs.verify.reader import InEffect

CORE = "https://httpd.apache.org/docs/2.4/mod/core.html"
PROXY = "https://httpd.apache.org/docs/2.4/mod/mod_proxy.html"
DOCS = {
    "Timeout": f"{CORE}#timeout", "ProxyTimeout": f"{PROXY}#proxytimeout",
    "ProxyIOBufferSize": f"{PROXY}#proxyiobuffersize",
    **{key: f"{PROXY}#proxypass" for key in ("flushpackets", "flushwait", "timeout", "connectiontimeout",
                                             "keepalive", "disablereuse")},
    "DEFLATE": "https://httpd.apache.org/docs/2.4/mod/mod_deflate.html#recommended",
    "ModSecurity": "https://github.com/owasp-modsecurity/ModSecurity/wiki/Reference-Manual-(v2.x)#SecResponseBodyMimeType",
    "no-gzip": "https://httpd.apache.org/docs/2.4/env.html#no-gzip",
    "proxy-sendchunked": "https://httpd.apache.org/docs/2.4/mod/mod_proxy_http.html#env",
    "force-proxy-request-1.0": "https://httpd.apache.org/docs/2.4/mod/mod_proxy_http.html#env",
    **{name: "https://httpd.apache.org/docs/2.4/mod/mpm_common.html#" + name.lower()
       for name in ("MaxRequestWorkers", "ThreadsPerChild", "ServerLimit")},
}
# The ProxyPass keys read, with httpd 2.4's defaults ("" for timeout: ProxyTimeout applies).
KEYS = {"flushpackets": "off", "flushwait": "10", "timeout": "", "connectiontimeout": "", "keepalive": "off",
        "disablereuse": "off"}
# mpm_common's defaults per MPM: ServerLimit, ThreadsPerChild, MaxRequestWorkers.
MPMS = {"mpm_event_module": ("event", 16, 25), "mpm_worker_module": ("worker", 16, 25),
        "mpm_prefork_module": ("prefork", 256, 1)}
ENV_VARS = ("no-gzip", "proxy-sendchunked", "force-proxy-request-1.0", "proxy-nokeepalive")
SSE = "text/event-stream"


def settings(config: ApacheConfig, served: Served) -> InEffect:
    """What is in effect on the served rule: its keys, its servers', its <Location>s', the MPM's."""
    found: dict[str, Setting] = {}
    put = found.__setitem__
    server = [config.main] + ([served.vhost] if served.vhost is not None else [])
    put("ProxyPass", Setting("ProxyPass", served.rule.target, served.rule.directive.text(), served.rule.directive.where))
    timeout = _server_level(server, "Timeout", "60")
    put("Timeout", timeout)
    proxy_timeout = _server_level(server, "ProxyTimeout", None)
    if proxy_timeout.value is None:
        proxy_timeout = Setting("ProxyTimeout", timeout.value, f"ProxyTimeout {timeout.value} (Timeout's)",
                                timeout.where if not timeout.is_default else DEFAULT)
    put("ProxyTimeout", proxy_timeout)
    keys, keys_from = _keys(config, served.rule)
    for key, default in KEYS.items():
        if key in keys:
            put(key, Setting(key, keys[key], f"{key}={keys[key]}", keys_from.where))
        elif key == "timeout":
            put(key, Setting(key, proxy_timeout.value, f"timeout={proxy_timeout.value} (ProxyTimeout's)",
                             proxy_timeout.where))
        elif key == "connectiontimeout":
            put(key, Setting(key, timeout.value, f"connectiontimeout={timeout.value} (Timeout's)", timeout.where))
        else:
            put(key, Setting(key, default, f"{key}={default}", DEFAULT))
    put("ProxyIOBufferSize", _server_level(server, "ProxyIOBufferSize", "8192"))
    levels = server + served.locations
    put("DEFLATE", _deflate(config, levels))
    put("ModSecurity", _modsecurity(config, levels))
    for name in ENV_VARS:
        put(name, _env(levels, name))
    _mpm(config, found)
    return InEffect(found, _notes(config, served))


def seconds(setting: Setting) -> float:
    """A Timeout/ProxyTimeout/timeout= value: whole seconds (httpd also takes `ms` units)."""
    text = str(setting.value).strip().lower()
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.rstrip("s") or 0)


def _server_level(server: list[Directive], name: str, default: str | None) -> Setting:
    for level in reversed(server):
        found = level.last(name.lower())
        if found is not None and found.args:
            return Setting(name, found.args[0], found.text(), found.where)
    return Setting(name, default, f"{name} {default}", DEFAULT)


def _keys(config: ApacheConfig, rule: Rule) -> tuple[dict[str, str], Directive]:
    """The rule's own keys; a balancer:// target: its member's, then ProxySet's, under the rule's."""
    keys, source = dict(rule.keys), rule.directive
    if rule.target.startswith("balancer://"):
        name = rule.target.split("/")[2].lower()
        for block in (d for d in config.main.walk() if d.key == "proxy" and d.block is not None):
            if block.args and block.args[0].rstrip("/").lower() == f"balancer://{name}":
                for d in block.children():
                    if d.key in ("balancermember", "proxyset"):
                        extra = {a.split("=", 1)[0].lower(): a.split("=", 1)[1]
                                 for a in d.args if "=" in a}
                        if extra:
                            keys, source = {**extra, **keys}, d
    return keys, source



def _deflate(config: ApacheConfig, levels: list[Directive]) -> Setting:
    """mod_deflate on the event stream: `SetOutputFilter DEFLATE`, or `AddOutputFilterByType DEFLATE`
    naming text/event-stream; the last level that sets one wins."""
    if not {"deflate_module", "mod_deflate.c"} & config.modules:
        return Setting("DEFLATE", "off", "mod_deflate not loaded", DEFAULT)
    found: Setting | None = None
    for level in levels:
        for d in level.children():
            if d.key in ("setoutputfilter", "addoutputfilterbytype") and d.args and \
                    "deflate" in d.args[0].lower().split(";"):
                types = [t.lower() for t in d.args[1:]]
                if d.key == "setoutputfilter" or SSE in types or "text/*" in types:
                    found = Setting("DEFLATE", "on", d.text(), d.where)
            elif d.key in ("removeoutputfilterbytype", "removeoutputfilter") and found is not None:
                found = Setting("DEFLATE", "off", d.text(), d.where)
    return found or Setting("DEFLATE", "off", f"AddOutputFilterByType DEFLATE without {SSE}", DEFAULT)


def _modsecurity(config: ApacheConfig, levels: list[Directive]) -> Setting:
    """Whether mod_security2 reads the event stream's body (and so holds it, measured: labs/catalogue/
    waf.py); the last level that sets each directive wins (labs/verify/modsecurity.py)."""
    if not {"security2_module", "mod_security2.c"} & config.modules:
        return Setting("ModSecurity", "off", "mod_security2 not loaded", DEFAULT)
    return judged(((d.key, d.args, d.where) for level in levels for d in level.children()), DEFAULT)


def _env(levels: list[Directive], name: str) -> Setting:
    found = Setting(name, "unset", f"{name} unset", DEFAULT)
    for level in levels:
        for d in level.children():
            if d.key == "setenv" and d.args and d.args[0].lower() == name:
                found = Setting(name, d.args[1] if len(d.args) > 1 else "", d.text(), d.where)
            elif d.key == "unsetenv" and name in [a.lower() for a in d.args]:
                found = Setting(name, "unset", d.text(), d.where)
    return found


def _mpm(config: ApacheConfig, found: dict[str, Setting]) -> None:
    loaded = next((m for m in MPMS if m in config.modules), "mpm_event_module")
    mpm, server_limit, threads = MPMS[loaded]
    put = found.__setitem__
    put("mpm", Setting("mpm", mpm, f"mpm_{mpm}", DEFAULT if loaded not in config.modules else
                       next(d.where for d in config.main.walk() if d.key == "loadmodule" and d.args[:1] == [loaded])))
    limit = _server_level([config.main], "ServerLimit", str(server_limit))
    per_child = _server_level([config.main], "ThreadsPerChild", str(threads)) if mpm != "prefork" else \
        Setting("ThreadsPerChild", "1", "prefork: one request per process", DEFAULT)
    workers = _server_level([config.main], "MaxRequestWorkers", str(int(limit.value) * int(per_child.value)))
    if workers.is_default:  # the older name
        old = _server_level([config.main], "MaxClients", workers.value)
        workers = workers if old.is_default else Setting("MaxRequestWorkers", old.value, old.text, old.where)
    put("ServerLimit", limit)
    put("ThreadsPerChild", per_child)
    put("MaxRequestWorkers", workers)


def capacity(reading: Reading) -> int:
    """The streams served at once: MaxRequestWorkers, capped by ServerLimit x ThreadsPerChild."""
    return min(int(reading.value("MaxRequestWorkers")),
               int(reading.value("ServerLimit")) * int(reading.value("ThreadsPerChild")))


def _notes(config: ApacheConfig, served: Served) -> list[str]:
    notes = []
    if config.platform is not None:
        notes.append(f"a site file: judged inside {config.platform.about} (--main {config.platform.name}); "
                     "the server settings it inherits from there are assumed")
    if served.rule.kind == "RewriteRule":
        server = served.vhost or config.main
        if server.children("rewritecond"):
            notes.append("RewriteCond lines are not evaluated: the RewriteRule [P] is taken as applying")
    for include in config.missing:
        notes.append(f"Include {include.args[0]} ({include.where}) is not here: left out of the run; "
                     "judged as if it sets nothing")
    if any(d.key in ("setenvif", "setenvifnocase", "browsermatch") and "no-gzip" in " ".join(d.args)
           for d in config.main.walk()):
        notes.append("SetEnvIf ... no-gzip is conditional: not evaluated (mod_deflate judged as if it applies)")
    return notes
