"""HAProxy, as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.haproxy import config, read, rewrite, rules, versions
from labs.verify.kind import ConfigKind
from labs.verify.model import Reading, RouteWanted
from labs.verify.rewrite import Rewritten, assert_loopback
from proxies.binaries import find_binary


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    parsed = config.parse(path)
    frontend, _, _, _ = read.select_route(parsed, reading.wanted.at(reading.path, reading.host))
    rewritten = rewrite.rewrite(parsed, frontend, lab_port, folder, drop_user=in_container,
                                route_path=reading.path, host=reading.host,
                                binary=find_binary("haproxy", reading.wanted.series), version=reading.version)
    rewritten.host_header = reading.host  # the Host the route's ACLs ask for
    assert_loopback(rewrite.addresses(rewritten.files[str(path)][1]))
    rewritten.write()
    return rewritten


KIND = ConfigKind(
    proxy="haproxy", example="haproxy.cfg",
    shape=re.compile(r"^(global|defaults|frontend|backend|listen)(\s+\S+)*\s*$", re.M),
    read=read.read, suspicions=rules.suspicions, run_here=run_here, defaults=versions.TABLE,
    fallback={
        "buffering": ("option http-no-delay", "option http-no-delay"),
        "coalescing": ("option http-no-delay", "option http-no-delay"),
        "compression-delay": ("compression type", "compression type without text/event-stream"),
        "idle-timeout": ("timeout server", "timeout server above the longest silence"),
        "total-timeout": ("timeout server", "no whole-response limit for the streaming backend"),
        "disconnect-not-propagated": ("option abortonclose", "option abortonclose"),
        "connection-limit": ("frontend maxconn", "maxconn above the concurrent streams"),
    })
