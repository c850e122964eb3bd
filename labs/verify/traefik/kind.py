"""Traefik (a static file with its file provider's dynamic configuration), as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from labs.verify.kind import ConfigKind
from labs.verify.model import Reading, RouteWanted
from labs.verify.rewrite import Rewritten, assert_loopback
from labs.verify.traefik import config, read, rewrite, routes, rules


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    parsed = config.parse(path)
    match, _ = routes.select_route(parsed, RouteWanted(reading.path, reading.host, headers=reading.wanted.headers))
    rewritten = rewrite.rewrite(parsed, match.router.name, lab_port, folder)
    rewritten.host_header = reading.host  # the Host the router's rule asks for
    assert_loopback(rewrite.addresses(yaml.safe_load(rewritten.files[str(path)][1])))
    rewritten.write()
    return rewritten


KIND = ConfigKind(
    proxy="traefik", example="traefik.yml",
    # Traefik's own words: its static sections, or a dynamic file's routers with a rule.
    shape=re.compile(r"^\s*(entryPoints|certificatesResolvers)\s*:|^\s*\[entryPoints\]|"
                     r"\brule\s*[:=]\s*[\"']?(Host|PathPrefix|Path|HostRegexp|PathRegexp)\(", re.M | re.I),
    read=read.read, suspicions=rules.suspicions, run_here=run_here,
    fallback={
        "buffering": ("buffering middleware", "no buffering middleware on the streaming router"),
        "coalescing": ("responseForwarding.flushInterval", "flushInterval -1 on the service"),
        "compression-delay": ("compress middleware", "compress with excludedContentTypes text/event-stream"),
        "idle-timeout": ("forwardingTimeouts", "no forwarding timeout below the longest silence"),
        "total-timeout": ("respondingTimeouts.writeTimeout", "writeTimeout 0s on the entry point"),
        "disconnect-not-propagated": ("middlewares", "no middleware that holds the request (buffering, retry)"),
        "connection-limit": ("inFlightReq middleware", "inFlightReq amount above the concurrent streams"),
    })
