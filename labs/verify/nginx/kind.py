"""nginx, as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.kind import ConfigKind
from labs.verify.model import Reading, RouteWanted
from labs.verify.nginx import config, read, rewrite, routes, rules, targets, versions
from proxies.binaries import find_binary
from labs.verify.rewrite import Rewritten, assert_loopback


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    parsed = config.parse(path, reading.main)
    choice = routes.select_route(parsed, reading.wanted.at(reading.path, reading.host))
    rewritten = rewrite.rewrite(parsed, choice.server, lab_port, folder, drop_user=in_container,
                                binary=find_binary("nginx", reading.wanted.series), version=reading.version)
    rewritten.write()  # the check reads the written main file back with crossplane
    if not in_container:
        rewrite.let_workers_in(parsed, folder)
    assert_loopback(targets.addresses(str(rewritten.main)))
    return rewritten


KIND = ConfigKind(
    proxy="nginx", example="nginx.conf",
    shape=re.compile(r"^\s*(http|events|server|upstream|stream)(\s+[^\s{]+)?\s*\{", re.M),  # not Caddy's `http://host {` or `servers {`
    read=read.read, suspicions=rules.suspicions, run_here=run_here, defaults=versions.TABLE,
    fallback={
        "buffering": ("proxy_buffering", 'proxy_buffering off; proxy_http_version 1.1; proxy_set_header Connection "";'),
        "coalescing": ("proxy_buffering", "proxy_buffering off;"),
        "compression-delay": ("gzip_types", "gzip_types without text/event-stream"),
        "idle-timeout": ("proxy_read_timeout", "proxy_read_timeout above the longest silence"),
        "total-timeout": ("proxy_read_timeout", "no limit on the whole response for the streaming location"),
        "disconnect-not-propagated": ("proxy_ignore_client_abort", "proxy_ignore_client_abort off;"),
        "connection-limit": ("worker_connections", "worker_connections above twice the concurrent streams"),
    })
