"""Headers held until the first body byte: a cut after the origin's headers that reached the
client with no status before it, named as such rather than as a plain idle cut.

Cloudflare holds a response's headers until its first body byte: through it the client of a
silent MCP GET stream never got the 200, only the cut at 125.4 s (robhunter/agentdeals#1098).
nginx before 1.23 does the same over HTTP/2 (the catalogue's `nginx-http2-headers`). When the
origin sends its headers and then nothing and a hop cuts the silence, the client sees no status
at all (Cloudflare) or the status only with the cut: nginx 1.22.1 over HTTP/2 sends the HEADERS
frame with its RST_STREAM (both at 5.009 s for proxy_read_timeout 5s; over HTTP/1.1 the same
nginx sends them at once, and nginx 1.30.6 over both: tests/labs/probe/test_platform_limits.py,
`-k 125s -rP`). The cure is on the server: an SSE comment right after the headers, which a
heartbeat gives only at its first beat.

The after-headers silence asks the canary for its headers and then nothing (the role chunk with
the first token, as vLLM sends it: labs/probe/knobs.py). The idle check measures over HTTP/1.1;
on an entry that offers h2 one more try at the cut's silence goes over HTTP/2 (labs/probe/silence.py).
"""
from __future__ import annotations

from typing import Any

from labs.client.results import StreamResult
from labs.findings.evidence import ended, secs

KEY = "held_headers"  # Observation.measurements[KEY]: what showed the hold (None: nothing did)
# Headers at this share of the time to the cut or later were held: the origin sent them at once.
HELD_SHARE = 0.5
FIX = ("held-headers: the server writes an SSE comment right after its headers (the lab's `--hello`): "
       "a hop that holds the headers until the first body byte then sends them at once")


def held(result: StreamResult) -> bool:
    """Cut, with no status before the cut: none at all, or headers only at HELD_SHARE of the
    way to the end or later."""
    if result.outcome in ("complete", "disconnected", "timeout") or result.end_s is None:
        return False
    if result.status is None or result.headers_s is None:
        return True
    return result.headers_s >= HELD_SHARE * result.end_s


def seen(result: StreamResult, protocol: str) -> dict[str, Any]:
    """The numbers that show the hold, for --json."""
    return {"protocol": protocol, "status": result.status, "headers_s": result.headers_s,
            "end_s": result.end_s, "ended": ended(result)}


def said(shown: dict[str, Any]) -> str:
    """One clause for the evidence."""
    if shown["status"] is None or shown["headers_s"] is None:
        got = f"no status at all before the cut ({shown['ended']} after {secs(shown['end_s'])})"
    else:
        got = (f"the headers (HTTP {shown['status']}) only with the cut, at {secs(shown['headers_s'])} "
               f"(the cut at {secs(shown['end_s'])})")
    return (f"over {shown['protocol']} the client got {got}, though the origin sent them at once: "
            f"a hop holds the response headers until the first body byte")
