"""HAProxy's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import BODY, HEADERS, IDLE, MAX_BODY, SILENCE, WHOLE_ANSWERS
from proxies.haproxy.settings import HaproxySettings


def haproxy() -> HaproxySettings:
    return HaproxySettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        maxconn_global=8192, maxconn_frontend=4096,
        http_no_delay=True, abortonclose=True,
        # Whole JSON answers only: its gzip delays every event of a stream (the template says why).
        compression_algo="gzip", compression_types=WHOLE_ANSWERS,
        # timeout client bounds a client that pauses its upload or stops reading, never a silence
        # of the server's (measured: a 1 s timeout client did not cut a stream silent for 3 s).
        timeout_connect="5s", timeout_client=BODY, timeout_server=SILENCE, timeout_tunnel="1h",
        timeout_http_request=HEADERS, timeout_http_keep_alive=IDLE,
        max_body_bytes=MAX_BODY, refuse_chunked=True, timeout_body=BODY, json_errors=True,
        http_reuse="safe")
