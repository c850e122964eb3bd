"""Caddy's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import BODY, COMPRESSIBLE, HEADERS, IDLE, MAX_BODY, SILENCE
from proxies.caddy.settings import CaddySettings


def caddy() -> CaddySettings:
    return CaddySettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        encode=("gzip",), encode_skip_event_streams=True, encode_types=COMPRESSIBLE,
        dial_timeout="5s", read_timeout=SILENCE,
        read_header_timeout=HEADERS, read_body_timeout=BODY, idle_timeout=IDLE,
        max_body_bytes=MAX_BODY, buffer_requests=True, json_errors=True)
