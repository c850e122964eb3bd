"""Caddy (a Caddyfile or Caddy's JSON), as verify reads and runs it."""
from __future__ import annotations

import json
import re
from pathlib import Path

from labs.verify.caddy import config, read, rewrite, routes, rules
from labs.verify.kind import ConfigKind
from labs.verify.model import Reading, RouteWanted
from labs.verify.rewrite import Rewritten, assert_loopback


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    parsed = config.parse(path, reading.wanted.series)
    found, _, _ = routes.select_route(parsed, RouteWanted(reading.path, reading.host))
    rewritten = rewrite.rewrite(parsed, found.server, lab_port, folder)
    rewritten.write()
    assert_loopback(rewrite.addresses(json.loads(rewritten.main.read_text())))
    return rewritten


KIND = ConfigKind(
    proxy="caddy", example="Caddyfile",
    # A Caddyfile directive opening a line (nginx and HAProxy have none of these words), or
    # Caddy's JSON (its apps.http block).
    shape=re.compile(r"^\s*(reverse_proxy|encode|handle_path|php_fastcgi|file_server|respond|"
                     r"tls\s+(internal|\S+@\S+))\b|\"handler\"\s*:\s*\"(reverse_proxy|subroute)\"", re.M),
    read=read.read, suspicions=rules.suspicions, run_here=run_here,
    fallback={
        "buffering": ("response_buffers", "no response_buffers on the streaming route"),
        "coalescing": ("flush_interval", "flush_interval -1"),
        "compression-delay": ("encode", "@compressible not header Accept *text/event-stream*  then  "
                                        "encode @compressible gzip"),
        "idle-timeout": ("read_timeout", "transport http { read_timeout } above the longest silence"),
        "total-timeout": ("server write_timeout", "no write (or read_body) server timeout for the API"),
        "disconnect-not-propagated": ("flush_interval", "leave flush_interval unset (event streams are "
                                                        "flushed at once)"),
        "connection-limit": ("max_conns_per_host", "max_conns_per_host above the concurrent streams"),
    })
