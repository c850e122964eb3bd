"""Traefik's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import BODY, COMPRESSIBLE, IDLE, SILENCE
from proxies.traefik.settings import TraefikSettings


def traefik() -> TraefikSettings:
    return TraefikSettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        read_timeout=BODY, write_timeout=0, idle_timeout=IDLE, flush_interval="-1",
        dial_timeout="5s", response_header_timeout=SILENCE, idle_conn_timeout="4s",
        # No body limit here: Traefik's only one (the buffering middleware) also holds every
        # response whole, maxResponseBodyBytes 0 included (measured; the exported file says
        # so); the server's own --max-body-bytes answers 413.
        compress=True, compress_included_types=COMPRESSIBLE,
        fast_proxy=False)  # Go's proxy: the exported file says why (docs/field-notes.md#traefiks-early-cut)
