"""HAProxy's defaults by version: the ones verify reads on a streaming route (labs/verify/versions.py
says how they are used), and how a run on the HAProxy here is made to behave as the intended one.

Read from HAProxy's git history and `doc/configuration.txt` (2.6 against 3.4), 2026-12-02:
- 2.8.0: an `ssl` bind of an HTTP frontend with no `alpn`, `npn` or `no-alpn` offers
  `h2,http/1.1` (commit 5003ac7fe, "set useful ALPN defaults for HTTPS and QUIC"); 2.6 offers no
  ALPN there, so clients speak HTTP/1.1.
- 3.3.0: `option abortonclose` is on in HTTP-mode backends unless `no option abortonclose` says
  otherwise (commit 644b3dc7d, "enable abortonclose by default on HTTP proxies").
The timeouts (none set: no limit), `option http-no-delay` (off) and the compression settings
(off) did not change in that range. Changed there and not read here: `fd-hard-limit` 1048576 by
default (3.1), `balance random` as the default algorithm (3.3).
"""
from __future__ import annotations

from labs.verify.edits import MARK, TextEdits
from labs.verify.haproxy.config import HaproxyConfig, Section
from labs.verify.versions import DefaultsTable, Version, shown

__all__ = ["BASE", "TABLE", "intended_defaults", "shown"]

ALPN = "ssl bind alpn"
BASE: dict[str, str] = {"option http-no-delay": "off", "option abortonclose": "off", ALPN: ""}
CHANGES: tuple[tuple[Version, dict[str, str], str], ...] = (
    ((2, 8), {ALPN: "h2,http/1.1"},
     "HAProxy 2.8.0 (2023-05-31): an ssl bind without alpn offers h2,http/1.1 (commit 5003ac7fe; "
     "https://docs.haproxy.org/2.8/configuration.html#5.1-alpn)"),
    ((3, 3), {"option abortonclose": "on"},
     "HAProxy 3.3.0 (2025-11-26): option abortonclose is the default in HTTP backends (commit 644b3dc7d; "
     "https://docs.haproxy.org/3.3/configuration.html#4.2-option%20abortonclose)"),
)
TABLE = DefaultsTable("HAProxy", BASE, CHANGES, oldest=(2, 6), kind="haproxy")
# From here the backend's `option abortonclose` alone lets the server go when the client leaves
# (measured with `labs verify --check disconnect`, 2026-12-06: 3.2.26 noticed at 0.00 s, 2.6.12
# 2.13 s late as with none). The versions between were not measured: they are judged as 2.6.
BACKEND_ALONE: Version = (3, 2)


def says_abortonclose(section: Section) -> bool:
    """Whether the section says `option abortonclose` either way."""
    return bool(section.find("option", "abortonclose") or section.find("no", "option", "abortonclose"))


def is_http(config: HaproxyConfig, section: Section) -> bool:
    defaults = config.defaults_for(section)
    mode = section.last("mode") or (defaults.last("mode") if defaults else None)
    return mode is not None and mode.words[1:2] == ["http"]


def intended_defaults(config: HaproxyConfig, edit: TextEdits, intended: Version, here: Version | None,
                      note) -> dict[int, list[str]]:
    """Where the HAProxy here would apply a default the intended version does not have, the
    intended value is written explicitly, so the run behaves as that version. Returns the bind
    parameters to add, by the bind's line (the bind line itself is rewritten by the caller)."""
    if here is None or here == intended:
        return {}
    differ = {name: new for name, _, new, _ in TABLE.changes_between(here, intended)}
    written: list[str] = []
    if "option abortonclose" in differ:
        written += _abortonclose(config, edit, differ["option abortonclose"] == "on", intended, here, note)
    binds: dict[int, list[str]] = {}
    if ALPN in differ:
        for section in config.proxies("frontend", "listen"):
            if not is_http(config, section):
                continue
            for bind in section.find("bind"):
                if "ssl" in bind.words[2:] and not {"alpn", "npn", "no-alpn"} & set(bind.words):
                    binds[bind.line] = ["alpn", differ[ALPN]] if differ[ALPN] else []
                    if differ[ALPN]:
                        written.append(f"alpn {differ[ALPN]} on the ssl bind at line {bind.line}")
    if written:
        note(f"HAProxy {shown(intended)}'s defaults are written into the run ({'; '.join(written)}): the "
             f"HAProxy here is {shown(here)}")
    return binds


def _abortonclose(config: HaproxyConfig, edit: TextEdits, on: bool, intended: Version, here: Version,
                  note) -> list[str]:
    """The intended abortonclose default, written into the defaults sections HTTP proxies inherit:
    HAProxy needs it on the frontend too, and before 3.3 a frontend takes it only from there
    (labs/verify/haproxy/read.py says what was measured). A section that says it either way keeps
    its own; a frontend line the HAProxy here ignores is said."""
    option = "option abortonclose" if on else "no option abortonclose"
    mark = f"  # {MARK}: HAProxy {shown(intended)}'s default"
    targets: list[Section] = []
    orphans: list[Section] = []  # HTTP proxies above any defaults section
    for section in config.proxies("frontend", "backend", "listen"):
        if not is_http(config, section):
            continue
        if says_abortonclose(section):
            if section.kind == "frontend" and here < (3, 3):
                note(f"frontend {section.name} says `option abortonclose` itself, which HAProxy takes from "
                     f"{shown(intended)} on; the HAProxy here ({shown(here)}) ignores it, so the run follows "
                     "its defaults section")
            else:
                continue
        defaults = config.defaults_for(section)
        if defaults is None:
            orphans.append(section)
        elif not says_abortonclose(defaults) and defaults not in targets:
            targets.append(defaults)
    written = []
    for defaults in targets:
        edit.insert_after(defaults.line, [option + mark])
        written.append(f"{option} in the defaults section at line {defaults.line}")
    if orphans:
        first = min(orphans, key=lambda section: section.line)
        edit.insert_after(first.line - 1, [f"defaults{mark}", f"    {option}"], indent="")
        written.append(f"{option} in a defaults section above {first.kind} {first.name}")
    return written
