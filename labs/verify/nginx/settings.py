"""What is in effect on the nginx location that serves the chosen route (labs/verify/nginx/routes.py
finds it).

Settings are inherited main -> http -> server -> location (nested locations too): the innermost
level that sets a directive wins; array directives (`proxy_set_header`) are inherited only by a
level that sets none of its own. Where nothing sets a directive, the default of the nginx version
asked for (--proxy-version), else of the release that runs it, applies (labs/verify/nginx/versions.py).
"""
from __future__ import annotations

import re

from labs.findings import UnusableInput
from labs.verify.model import DEFAULT, RouteWanted, Setting
from labs.verify.nginx.config import Directive, NginxConfig, context_chain
from labs.verify.nginx.routes import Served, regex_unreadable
from labs.verify.nginx import versions
from labs.verify.nginx.modsecurity import read_modsecurity, uses_modsecurity
from labs.verify.nginx.targets import PASS_DIRECTIVES, names_upstream
from labs.verify.reader import InEffect
from proxies.binaries import find_binary

# What the reading judges: every default of labs/verify/nginx/versions.py but the two read apart.
DEFAULTS = [name for name in versions.BASE if name not in ("proxy_set_header Connection", "keepalive")]
MAIN_DEFAULTS = {"worker_processes": "1", "worker_rlimit_nofile": ""}
EVENTS_DEFAULTS = {"worker_connections": "512"}
# The directives the reading reads: the rewrite keeps each as the user wrote it (that is what is measured).
READ = frozenset(name.split()[0] for name in [*versions.BASE, *MAIN_DEFAULTS, *EVENTS_DEFAULTS])
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}


def parse_time(text: str) -> float:
    """An nginx time ("60s", "1m30s", "500ms", "75") in seconds."""
    total, rest = 0.0, text.strip()
    if re.fullmatch(r"\d+", rest):
        return float(rest)
    for number, unit in re.findall(r"(\d+)(ms|[smhdwMy])", rest):
        total += int(number) * _UNITS[unit]
    if not re.fullmatch(r"(\d+(ms|[smhdwMy]))+", rest):
        raise ValueError(f"not an nginx time: {text!r}")
    return total


def in_effect(config: NginxConfig, served: Served, wanted: RouteWanted) -> InEffect:
    """Every streaming setting in effect on the served location, with the defaults of the
    version asked for or of the release that runs it, and what the reading noticed."""
    location = served.location
    chain = context_chain(location)
    version, said = versions.TABLE.chosen(wanted.version, find_binary("nginx", wanted.series))
    table = versions.TABLE.defaults(version)
    settings = {name: _inherited(chain, name, table[name]) for name in DEFAULTS}
    settings["proxy_set_header Connection"] = _connection_header(chain, table["proxy_set_header Connection"])
    main_block = config.main
    for name, default in MAIN_DEFAULTS.items():
        settings[name] = _one(main_block, name, default)
    events = main_block.first("events")
    for name, default in EVENTS_DEFAULTS.items():
        settings[name] = _one(events, name, default) if events else _default(name, default)
    upstream = upstream_block(config, location)
    if upstream is not None:
        keepalive = upstream.first("keepalive")
        settings["keepalive"] = (
            Setting("keepalive", keepalive.args[0], keepalive.text(), keepalive.where)
            if keepalive else _default("keepalive", table["keepalive"]))
    _check_values(settings)
    notes = [said]
    if uses_modsecurity(chain):
        settings["ModSecurity"] = waf = read_modsecurity(chain)
        if waf.value == "reads-sse":
            notes.append(f"{waf.text} ({waf.where}): nginx's ModSecurity connector inspects the stream as it "
                         "passes, without holding it (measured on nginx 1.22 and 1.30: "
                         "tests/reliability/test_nginx_modsecurity_streams.py); a blocking response rule fires "
                         "only after the last event, and nginx then cuts the connection without the final chunk")
    if any(d.name == "if" for d in location.walk()):
        notes.append("the location has `if` blocks; they are not evaluated (settings read outside them)")
    if config.platform is not None:
        notes.append(f"a site file: judged inside {config.platform.about} (--main "
                     f"{config.platform.name}); the http settings it inherits from there are assumed")
    notes += [f"{problem}: taken as not matching" for problem in regex_unreadable(config)]
    notes += _missing_includes(config, chain, settings)
    return InEffect(settings, notes, versions.shown(version))


def _check_values(settings: dict[str, Setting]) -> None:
    """A value nginx itself would refuse (`proxy_read_timeout 10x`): the user's error, with its line,
    before any rule reads it as a number."""
    for setting in settings.values():
        if setting.is_default:
            continue
        name, value = setting.name, str(setting.value)
        bad = ((name.endswith("_timeout") and not _is_time(value))
               or (name == "worker_connections" and not value.isdigit())
               or (name == "worker_processes" and value != "auto" and not value.isdigit()))
        if bad:
            file, _, line = setting.where.rpartition(":")
            raise UnusableInput(f"{setting.text}: not a value nginx accepts for {name}", file=file,
                                line=int(line) if line.isdigit() else None)


def _is_time(text: str) -> bool:
    try:
        parse_time(text)
        return True
    except ValueError:
        return False


def _missing_includes(config: NginxConfig, chain: list[Directive], settings: dict[str, Setting]) -> list[str]:
    """Each include that is not here, and which settings of the route it could have changed: those
    in effect from its block or above (or defaults), when the include sits on the route's chain."""
    notes = []
    for include in config.missing:
        block = include.parent
        if block not in chain:
            notes.append(f"include {include.args[0]} ({include.where}) is not here; it is outside the "
                         "judged route's blocks, so it changes nothing judged")
            continue
        depth = chain.index(block)
        levels = {id(b): i for i, b in enumerate(chain)}
        could = [s.name for s in settings.values()
                 if s.is_default or _level_of(s, chain, levels) <= depth]
        notes.append(f"include {include.args[0]} ({include.where}) is not here: left out of the run; it "
                     f"could set {', '.join(could) or 'nothing judged'} for this route, judged as if it sets "
                     "nothing")
    return notes


def _level_of(setting: Setting, chain: list[Directive], levels: dict[int, int]) -> int:
    for index in range(len(chain) - 1, -1, -1):
        for d in chain[index].block or []:
            if d.where == setting.where and setting.name.split()[0] == d.name:
                return index
    return 0


def upstream_block(config: NginxConfig, location: Directive) -> Directive | None:
    """The `upstream NAME {}` block the location's proxy_pass names, when it names one."""
    passing = next((location.first(p) for p in PASS_DIRECTIVES if location.first(p)), None)
    if passing is None or not passing.args:
        return None
    names = {u.args[0]: u for u in config.blocks("upstream") if u.args}
    name = names_upstream(passing.args[0], set(names))
    return names.get(name) if name else None


def _inherited(chain: list[Directive], name: str, default: str) -> Setting:
    for block in reversed(chain):
        found = block.first(name)
        if found is not None:
            return Setting(name, " ".join(found.args), found.text(), found.where)
    return _default(name, default)


def _connection_header(chain: list[Directive], default: str = "close") -> Setting:
    """proxy_set_header is inherited only from the nearest level that has any."""
    name = "proxy_set_header Connection"
    for block in reversed(chain):
        headers = block.children("proxy_set_header")
        if headers:
            for header in reversed(headers):
                if header.args and header.args[0].lower() == "connection":
                    value = header.args[1] if len(header.args) > 1 else ""
                    return Setting(name, value, f'proxy_set_header Connection "{value}"', header.where)
            # This level sets other headers only: Connection falls back to nginx's own default.
            return Setting(name, default, f'proxy_set_header Connection "{default}"', DEFAULT)
    return Setting(name, default, f'proxy_set_header Connection "{default}"', DEFAULT)


def _one(block: Directive, name: str, default: str) -> Setting:
    found = block.first(name)
    if found is None:
        return _default(name, default)
    return Setting(name, " ".join(found.args), found.text(), found.where)


def _default(name: str, default: str) -> Setting:
    return Setting(name, default, f"{name} {default}".strip(), DEFAULT)
