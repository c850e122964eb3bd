"""Regexes written for a proxy's engine (nginx's PCRE, Envoy's RE2, HAProxy's PCRE) evaluated
with Python's: named groups are spelled `(?<name>...)` or `(?'name'...)` there, `(?P<name>...)`
here. A construct Python lacks leaves the regex unreadable (None): the caller takes it as not
matching and says so, never raises."""
from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=512)
def compiled(pattern: str, ignore_case: bool = False) -> re.Pattern[str] | None:
    python = re.sub(r"\(\?<(?![=!])(\w+)>", r"(?P<\1>", pattern)
    python = re.sub(r"\(\?'(\w+)'", r"(?P<\1>", python)
    try:
        return re.compile(python, re.IGNORECASE if ignore_case else 0)
    except (re.error, OverflowError, RecursionError):
        return None


def search(pattern: str, text: str, ignore_case: bool = False) -> bool:
    found = compiled(pattern, ignore_case)
    return found is not None and found.search(text) is not None


def fullmatch(pattern: str, text: str, ignore_case: bool = False) -> bool:
    found = compiled(pattern, ignore_case)
    return found is not None and found.fullmatch(text) is not None
