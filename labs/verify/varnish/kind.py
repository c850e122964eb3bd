"""Varnish (VCL), as verify reads and runs it."""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.kind import ConfigKind
from labs.verify.model import Reading
from labs.verify.rewrite import Rewritten, assert_loopback
from labs.verify.varnish import config, read, rewrite, rules


def run_here(path: Path, reading: Reading, lab_port: int, folder: Path, in_container: bool) -> Rewritten:
    rewritten = rewrite.rewrite(config.parse(path), lab_port, folder)
    rewritten.write()
    assert_loopback(rewrite.addresses(rewritten.main))
    return rewritten


KIND = ConfigKind(
    proxy="varnish", example="default.vcl",
    # VCL's version line (every VCL 4 file opens with it), or a backend with its .host.
    shape=re.compile(r"^\s*vcl\s+\d\.\d\s*;|^\s*backend\s+[\w-]+\s*\{[^}]*\.host\s*=", re.M),
    read=read.read, suspicions=rules.suspicions, run_here=run_here,
    fallback={
        "buffering": ("do_stream", "set beresp.do_stream = true; in vcl_backend_response (the default: "
                      "remove a `false`)"),
        "coalescing": ("do_stream", "set beresp.do_stream = true; and no do_gzip on text/event-stream"),
        "compression-delay": ("do_gzip", "no beresp.do_gzip for text/event-stream answers"),
        "idle-timeout": ("between_bytes_timeout", ".first_byte_timeout and .between_bytes_timeout in the "
                         "backend above the longest silence"),
        "total-timeout": ("send_timeout", "set sess.send_timeout in vcl_recv above the longest answer"),
        # Measured on 7.1.1 (tests/verify/test_varnish.py): a client that leaves during a silence is
        # noticed at Varnish's next write to it; no VCL setting changes that.
        "disconnect-not-propagated": ("vcl_recv", "have the server send `: ping` heartbeats during silences: "
                                      "Varnish notices a departed client only when a write to it fails"),
        "connection-limit": ("max_connections", ".max_connections in the backend above the concurrent streams"),
    })
