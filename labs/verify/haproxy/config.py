"""HAProxy configs read as HAProxy does: sections of keyword lines, comments and quotes handled.

A small parser is enough (HAProxy's grammar is line-based): each section keeps its keyword, name,
line and its statements as word lists with line numbers; `words_of` splits a line the way HAProxy
does (quotes, backslash escapes, `#` comments). Every `timeout NAME VALUE` is read as a time while
parsing, so a value HAProxy would refuse is named at its line before anything else is read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.model import display_path

_UNITS = {"us": 1e-6, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
SECTIONS = ("global", "defaults", "frontend", "backend", "listen", "peers", "resolvers", "userlist",
            "mailers", "program", "cache", "ring", "http-errors", "crt-store", "traces")


@dataclass
class Statement:
    words: list[str]
    line: int

    @property
    def keyword(self) -> str:
        return self.words[0]


@dataclass
class Section:
    kind: str
    name: str
    line: int
    statements: list[Statement] = field(default_factory=list)
    from_defaults: str | None = None  # `frontend fe from NAME`

    def find(self, *words: str) -> list[Statement]:
        return [s for s in self.statements if s.words[:len(words)] == list(words)]

    def last(self, *words: str) -> Statement | None:
        found = self.find(*words)
        return found[-1] if found else None


@dataclass
class HaproxyConfig:
    file: Path
    text: str
    sections: list[Section]

    def named(self, kind: str, name: str) -> Section | None:
        return next((s for s in self.sections if s.kind == kind and s.name == name), None)

    def proxies(self, *kinds: str) -> list[Section]:
        return [s for s in self.sections if s.kind in kinds]

    def defaults_for(self, section: Section) -> Section | None:
        """`from NAME` when given, else the last `defaults` section above it."""
        if section.from_defaults:
            return self.named("defaults", section.from_defaults)
        found = None
        for candidate in self.sections:
            if candidate is section:
                break
            if candidate.kind == "defaults":
                found = candidate
        return found


def words_of(line: str) -> list[str]:
    words, word, quote, escape, in_word = [], [], None, False, False
    for char in line:
        if escape:
            word.append(char)
            escape, in_word = False, True
        elif char == "\\":
            escape = True
        elif quote:
            if char == quote:
                quote = None
            else:
                word.append(char)
        elif char in "\"'":
            quote, in_word = char, True
        elif char == "#":
            break
        elif char.isspace():
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
        else:
            word.append(char)
            in_word = True
    if in_word:
        words.append("".join(word))
    return words


def parse(path: Path) -> HaproxyConfig:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    text = path.read_text()
    sections: list[Section] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        words = words_of(raw)
        if not words:
            continue
        if words[0] in SECTIONS:
            name = words[1] if len(words) > 1 and words[1] != "from" else ""
            section = Section(words[0], name, number)
            if "from" in words:
                section.from_defaults = words[words.index("from") + 1] if words.index("from") + 1 < len(words) else None
            sections.append(section)
        elif not sections:
            raise UnusableInput(f"'{words[0]}' outside any section", file=str(path), line=number)
        else:
            sections[-1].statements.append(Statement(words, number))
    if not sections:
        raise UnusableInput("no HAProxy sections (global, defaults, frontend, backend, listen)", file=str(path))
    config = HaproxyConfig(path, text, sections)
    _check_timeouts(config)
    return config


def parse_time(text: str) -> float:
    """An HAProxy time ("30s", "1m", "500", in ms when bare) in seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(us|ms|s|m|h|d)?", text.strip())
    if match is None:
        raise ValueError(f"not an HAProxy time: {text!r}")
    return float(match[1]) * _UNITS[match[2] or "ms"]


def time_at(statement: Statement, path: Path) -> float:
    """The time of `timeout NAME VALUE`, else UnusableInput naming the line."""
    try:
        return parse_time(statement.words[2] if len(statement.words) > 2 else "")
    except ValueError as exc:
        raise UnusableInput(str(exc), file=display_path(path), line=statement.line) from None


def _check_timeouts(config: HaproxyConfig) -> None:
    for section in config.sections:
        for statement in section.find("timeout"):
            if len(statement.words) < 2:
                raise UnusableInput("timeout needs a name and a time (timeout server 30s)",
                                    file=display_path(config.file), line=statement.line)
            time_at(statement, config.file)
