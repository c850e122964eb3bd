"""Where a started process's output lands in its work folder, and the readers the proxy kinds
build their access logs from (each kind's `Logs` names its own; nginx, Envoy, Apache and
Varnish write `key=value` lines, read by `parse_logfmt`)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

PROCESS_LOG = "process.log"  # the binary's stdout and stderr, in its work folder
# The path the runtimes request to prove a proxy serves (its lines are left out of access logs).
READY_PATH = "/.streamlab-ready"

_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


def read_text(path: Path) -> str:
    """The file's text, or "" while the process has not written it yet."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def parse_logfmt(line: str) -> dict[str, str]:
    """`key=value key="quoted value"` -> dict (quotes removed, "-" kept as nginx/Envoy print it)."""
    return {key: value[1:-1] if value.startswith('"') else value for key, value in _PAIR.findall(line)}


def is_logfmt_access_line(line: str) -> bool:
    """The templates' access lines begin with their time (`time=...`)."""
    return line.startswith("time=")


def file_lines(name: str) -> Callable[[Path, object], list[str]]:
    """A reader of the access log the proxy writes to `name` in its work folder (any release)."""
    return lambda workdir, release: read_text(workdir / name).splitlines()


def process_lines(is_access: Callable[[str], object]) -> Callable[[Path, object], list[str]]:
    """A reader of the access lines among what the proxy prints (PROCESS_LOG), any release."""
    return lambda workdir, release: [line for line in read_text(workdir / PROCESS_LOG).splitlines() if is_access(line)]
