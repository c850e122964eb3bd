"""nginx's defaults by version: the ones a streaming route depends on, from nginx's CHANGES.

The reading judges a config with the defaults of the nginx it is written for (`--proxy-version`,
default the version of the binary that runs it here). When that version's defaults differ from the
binary's, the rewrite writes the intended version's values into the run explicitly, so what is
measured here is what that version does (labs/verify/nginx/rewrite.py).
"""
from __future__ import annotations

import functools
import re
import subprocess

from labs.findings import UnusableInput

Version = tuple[int, ...]
# name -> default as nginx 1.22 has it (the oldest version verify reads: Debian 12's, the one
# the lab runs). Written as the text a user would write to get it.
BASE: dict[str, str] = {
    "proxy_buffering": "on", "proxy_http_version": "1.0", "proxy_read_timeout": "60s",
    "proxy_send_timeout": "60s", "proxy_connect_timeout": "60s", "proxy_ignore_client_abort": "off",
    "proxy_request_buffering": "on", "proxy_buffer_size": "4k", "proxy_buffers": "8 4k",
    "proxy_cache": "off", "proxy_ignore_headers": "", "chunked_transfer_encoding": "on",
    "gzip": "off", "gzip_types": "text/html", "gzip_proxied": "off", "limit_conn": "",
    "proxy_set_header Connection": "close", "keepalive": "",
}
# (first version, what it changed, source): each later version keeps the earlier changes.
CHANGES: list[tuple[Version, dict[str, str], str]] = [
    ((1, 29, 7), {"proxy_http_version": "1.1", "proxy_set_header Connection": "", "keepalive": "32 local"},
     "nginx 1.29.7 (2026-03-24; stable from 1.30.0): HTTP/1.1 with keep-alive to upstreams by default "
     "(https://nginx.org/en/CHANGES, https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_http_version)"),
]
OLDEST: Version = (1, 22)


def parse_version(text: str) -> Version:
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", text.strip()):
        raise UnusableInput(f"--proxy-version must look like 1.30 or 1.29.7, not {text!r}")
    version = tuple(int(p) for p in text.strip().split("."))
    if version < OLDEST:
        raise UnusableInput(f"--proxy-version {text}: verify knows nginx's defaults from "
                            f"{'.'.join(map(str, OLDEST))} on")
    return version


def defaults(version: Version) -> dict[str, str]:
    out = dict(BASE)
    for since, changed, _ in CHANGES:
        if version >= since:
            out.update(changed)
    return out


def changes_between(a: Version, b: Version) -> list[tuple[str, str, str, str]]:
    """(setting, default in a, default in b, why) for every default that differs."""
    da, db = defaults(a), defaults(b)
    why = {name: source for since, changed, source in CHANGES if min(a, b) < since <= max(a, b)
           for name in changed}
    return [(name, da[name], db[name], why.get(name, "")) for name in da if da[name] != db[name]]


@functools.lru_cache(maxsize=None)
def binary_version(binary: str | None) -> Version | None:
    """The version of the nginx that runs the config here (`nginx -v`)."""
    if binary is None:
        return None
    try:
        said = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"nginx/(\d+(?:\.\d+)+)", said)
    return tuple(int(p) for p in found[1].split(".")) if found else None


def shown(version: Version) -> str:
    return ".".join(map(str, version))
