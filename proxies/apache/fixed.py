"""Apache httpd's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import BODY, COMPRESSIBLE, HEADERS, IDLE, MAX_BODY, SILENCE
from proxies.apache.settings import ApacheSettings


def apache() -> ApacheSettings:
    # Timeout also bounds a pause in the client's upload (BODY); ProxyTimeout the server's silences.
    return ApacheSettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        timeout=BODY, proxy_timeout=SILENCE, flushpackets="on", deflate_types=COMPRESSIBLE,
        request_header_timeout=HEADERS, request_body_timeout=BODY, keepalive_timeout=IDLE,
        limit_request_body=MAX_BODY, refuse_chunked=True, json_errors=True, hide_version=True, max_request_workers=1000)
