"""Varnish's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import BODY, HEADERS, IDLE, LONGEST_ANSWER, MAX_BODY, SILENCE
from proxies.varnish.settings import VarnishSettings


def varnish() -> VarnishSettings:
    # A CDN in front of a model: event streams and API answers are never cached nor coalesced;
    # the backend's silences are bounded as elsewhere. Varnish's header timeout is its runtime parameter
    # timeout_idle (5 s), already under HEADERS; the VCL can set only the idle wait after a request.
    # Bodies are read whole before the backend fetch (cache_req_body): nothing bounds a whole
    # body's time in Varnish 7.1, but a slow upload then holds no backend connection.
    return VarnishSettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        pass_event_streams=True, pass_api_requests=True, do_stream=True,
        connect_timeout="5s", first_byte_timeout=SILENCE, between_bytes_timeout=SILENCE,
        timeout_idle=IDLE, send_timeout=LONGEST_ANSWER, idle_send_timeout=BODY,
        max_body_bytes=MAX_BODY, cache_req_body=True, json_errors=True, hide_version=True)
