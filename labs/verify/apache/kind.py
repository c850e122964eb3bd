"""Apache httpd, as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.apache import config, read, rewrite, routes, rules
from labs.verify.kind import AtNextWrite, ConfigKind
from labs.verify.model import Reading, RouteWanted
from labs.verify.rewrite import Rewritten, assert_loopback


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    parsed = config.parse(path, reading.main)
    choice = routes.select_route(parsed, RouteWanted(reading.path, reading.host))
    rewritten = rewrite.rewrite(parsed, choice, lab_port, folder, drop_user=in_container)
    rewritten.write()
    assert_loopback(rewrite.addresses(rewritten.main))
    return rewritten


KIND = ConfigKind(
    proxy="apache", example="apache2.conf",
    # A section or directive only httpd has, at the start of a line (case-blind, as httpd reads).
    shape=re.compile(r"^\s*(<VirtualHost[\s>]|<Location(Match)?[\s>]|ProxyPass(Match)?\s|ServerRoot\s|"
                     r"LoadModule\s+\w+_module\s)", re.M | re.I),
    read=read.read, suspicions=rules.suspicions, run_here=run_here,
    # Measured on httpd 2.4.71 (`labs verify proxies/fixed/apache.conf --check disconnect`): without
    # heartbeats the server noticed 2.12 s after the client left, at the end of its 2 s silence;
    # with heartbeats every 0.5, 1 and 2 s, after 0.57, 1.06 and 2.07 s: at the first, 1 sent.
    departure_at_write=AtNextWrite("httpd 2.4 notices a departed client only when a write to it fails", 1),
    fallback={
        "buffering": ("flushpackets", "ProxyPass ... flushpackets=on, and no output filter (mod_deflate, "
                      "mod_substitute) on text/event-stream"),
        "coalescing": ("flushpackets", "ProxyPass ... flushpackets=on"),
        "compression-delay": ("DEFLATE", "AddOutputFilterByType DEFLATE without text/event-stream (or "
                              "SetEnv no-gzip 1 in the streaming <Location>)"),
        "idle-timeout": ("ProxyTimeout", "ProxyTimeout (or ProxyPass timeout=) above the longest silence"),
        "total-timeout": ("ProxyTimeout", "no limit on the whole response: ProxyTimeout bounds each read only"),
        # Late with heartbeats (--heartbeat): they did not reach the client as writes, and httpd
        # notices a departure only at a write (the first heartbeat after it, measured).
        "disconnect-not-propagated": ("ProxyPass", "let each heartbeat reach the client at once: no output "
                                      "filter (mod_deflate, mod_substitute) on text/event-stream; httpd notices "
                                      "a departed client only when a write to it fails"),
        "connection-limit": ("MaxRequestWorkers", "MaxRequestWorkers (and ServerLimit x ThreadsPerChild) "
                             "above the concurrent streams"),
    })
