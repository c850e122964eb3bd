"""Varnish (VCL), as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.kind import AtNextWrite, ConfigKind
from labs.verify.model import Reading
from labs.verify.rewrite import Rewritten, assert_loopback
from labs.verify.varnish import config, read, rewrite, rules


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    rewritten = rewrite.rewrite(config.parse(path), lab_port, folder)
    # varnishlog reads its own version's shared-memory log: the one of the release that runs it
    rewritten.contacted = lambda: rewrite.contacted(folder / rewrite.WORK_FOLDER, reading.wanted.series)
    rewritten.write()
    assert_loopback(rewrite.addresses(rewritten.main))
    return rewritten


KIND = ConfigKind(
    proxy="varnish", example="default.vcl",
    # VCL's version line (every VCL 4 file opens with it), or a backend with its .host.
    shape=re.compile(r"^\s*vcl\s+\d\.\d\s*;|^\s*backend\s+[\w-]+\s*\{[^}]*\.host\s*=", re.M),
    read=read.read, suspicions=rules.suspicions, run_here=run_here,
    # Measured on Varnish 7.1.1 (`labs verify proxies/fixed/varnish.vcl --check disconnect`): without
    # heartbeats the server noticed 2.17 s after the client left and generated 3 tokens for nobody
    # (httpd: 2); with heartbeats every 0.5, 1 and 2 s, after 1.09, 2.06 and 4.06 s: at the second,
    # 2 sent. As the third token suggests, its write to the client fails at the first, and the
    # fetch from the server stops only at its next read from it.
    departure_at_write=AtNextWrite("Varnish 7.1 notices a departed client only when a write to it fails", 2),
    fallback={
        "buffering": ("do_stream", "set beresp.do_stream = true; in vcl_backend_response (the default: "
                      "remove a `false`)"),
        "coalescing": ("do_stream", "set beresp.do_stream = true; and no do_gzip on text/event-stream"),
        "compression-delay": ("do_gzip", "no beresp.do_gzip for text/event-stream answers"),
        "idle-timeout": ("between_bytes_timeout", ".first_byte_timeout and .between_bytes_timeout in the "
                         "backend above the longest silence"),
        "total-timeout": ("send_timeout", "set sess.send_timeout in vcl_recv above the longest answer"),
        # Late with heartbeats (--heartbeat): they did not reach the client as writes, and Varnish
        # notices a departure only at a write (the second heartbeat after it, measured).
        "disconnect-not-propagated": ("vcl_recv", "let each heartbeat reach the client at once: "
                                      "beresp.do_stream true and no beresp.do_gzip on text/event-stream; Varnish "
                                      "notices a departed client only when a write to it fails"),
        "connection-limit": ("max_connections", ".max_connections in the backend above the concurrent streams"),
    })
