"""What nginx's ModSecurity v3 connector does on the judged location (docs/proxies.md, "A WAF in
front"): `modsecurity on|off` (the innermost level wins), the rules of `modsecurity_rules_file`
(with the files they `Include`) and `modsecurity_rules` of every level from http down (the
connector merges outer into inner), and in them the directives that decide whether the response
body of an event stream is inspected. Measured (tests/reliability/test_nginx_modsecurity_streams.py,
nginx 1.22 and 1.30): inspected or not, the connector passes each chunk on; its response rules run
when the body has ended, so a blocking one cuts the connection after the last event."""
from __future__ import annotations

import glob
import os
from typing import Iterator

from labs.verify.model import DEFAULT, Setting
from labs.verify.modsecurity import READ, judged
from labs.verify.nginx.config import Directive

RuleLine = tuple[str, list[str], str]  # (directive lowercased, its arguments, file:line)


def uses_modsecurity(chain: list[Directive]) -> bool:
    return any(d.name.startswith("modsecurity") for block in chain for d in block.children())


def read_modsecurity(chain: list[Directive]) -> Setting:
    """The "ModSecurity" setting: off, passes-sse (the stream's body is not inspected) or reads-sse,
    placed at the directive that decided it."""
    switch = next((block.first("modsecurity") for block in reversed(chain) if block.first("modsecurity")), None)
    if switch is None or not switch.args or switch.args[0] != "on":
        return Setting("ModSecurity", "off", switch.text() if switch else "modsecurity off",
                       switch.where if switch else DEFAULT)
    return judged(_rule_lines(chain), switch.where)


def _rule_lines(chain: list[Directive]) -> Iterator[RuleLine]:
    """(directive name lowercased, its arguments, file:line) of every rule line in effect, in order."""
    for block in chain:
        for d in block.children():
            if d.name == "modsecurity_rules_file" and d.args:
                path = d.args[0] if os.path.isabs(d.args[0]) else os.path.join(os.path.dirname(d.file), d.args[0])
                yield from _file_lines(path, depth=0)
            elif d.name == "modsecurity_rules" and d.args:
                yield from _text_lines(d.args[0], d.file, d.line, depth=0)


def _file_lines(path: str, depth: int) -> Iterator[RuleLine]:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return  # a file that is not here: nginx itself refuses the config, and the run says so
    yield from _text_lines(text, path, 1, depth)


def _text_lines(text: str, file: str, first_line: int, depth: int) -> Iterator[RuleLine]:
    pending, start = "", first_line
    for offset, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if not pending:
            start = first_line + offset
        if line.endswith("\\"):  # ModSecurity's line continuation
            pending += line[:-1] + " "
            continue
        words = (pending + line).split()
        pending = ""
        if not words or words[0].startswith("#"):
            continue
        key = words[0].lower()
        if key == "include" and len(words) > 1 and depth < 8:
            pattern = words[1].strip("\"'")
            pattern = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(file), pattern)
            for path in sorted(glob.glob(pattern)):
                yield from _file_lines(path, depth + 1)
        elif key in READ:
            yield key, [w.strip("\"'") for w in words[1:]], f"{file}:{start}"
