"""What a running proxy recorded of the upstreams it contacted: the loopback-only check's evidence.

Each kind's rewrite sets `Rewritten.contacted` to a reader of its own records (nginx's upstream
log, HAProxy's stats socket, Envoy's admin, Apache's and Caddy's debug logs, Varnish's shared
memory, Traefik's access log); these are the pieces they share: the run folder's logs, and `host:port` pairs found in
them by a pattern with two groups (an IPv6 address in brackets or not).
"""
from __future__ import annotations

import re
from pathlib import Path

ADDRESS = r"\[?([0-9a-fA-F.:]+?)\]?:(\d+)"  # host and port; brackets around IPv6 dropped


def log_text(folder: Path, *names: str) -> str:
    """The named files of the run folder, those that exist, one after another."""
    return "\n".join(path.read_text(errors="replace") for name in names
                     if (path := folder / name).is_file())


def addresses(pattern: str, text: str) -> set[str]:
    """`host:port` for every match of `pattern`, whose last two groups are ADDRESS's."""
    return {f"{m[m.lastindex - 1]}:{m[m.lastindex]}" for m in re.finditer(pattern, text)}
