"""Apache httpd's production settings, exported to `proxies/fixed/` (`python -m proxies export`);
the numbers they share, and why, are `proxies/fixed_settings.py`."""
from __future__ import annotations

from proxies.fixed_mcp import MCP_PORTS
from proxies.fixed_settings import BODY, COMPRESSIBLE, HEADERS, IDLE, MAX_BODY, SILENCE
from proxies.apache.settings import ApacheSettings

# The WAF's response bodies: Debian's modsecurity.conf-recommended list and JSON answers, never
# text/event-stream (an inspected stream arrives in one lump: docs/proxies.md#a-waf-in-front-modsecurity).
WAF_INSPECTED_TYPES = ("text/plain", "text/html", "text/xml", "application/json")
# ModSecurity with the OWASP core rule set, written out but switched off (`modsecurity_switchable`):
# a WAF needs two Debian packages and its rules' false positives tuned, an operator's call.
# ProcessPartial: a non-streamed answer above the 512 KiB it reads passes (Reject: a 500).
WAF = dict(modsecurity="On", modsecurity_crs=True, modsecurity_switchable=True, modsecurity_audit_log=True,
           modsecurity_request_body_access=True, modsecurity_request_body_limit=MAX_BODY,
           modsecurity_response_body_access=True, modsecurity_response_body_mime_types=WAF_INSPECTED_TYPES,
           modsecurity_response_body_limit_action="ProcessPartial")


def apache() -> ApacheSettings:
    # Timeout also bounds a pause in the client's upload (BODY); ProxyTimeout the server's silences.
    return ApacheSettings(
        mcp_ports=MCP_PORTS,  # the MCP route (proxies/fixed_mcp.py)
        timeout=BODY, proxy_timeout=SILENCE, flushpackets="on", deflate_types=COMPRESSIBLE,
        request_header_timeout=HEADERS, request_body_timeout=BODY, keepalive_timeout=IDLE,
        limit_request_body=MAX_BODY, refuse_chunked=True, json_errors=True, hide_version=True, max_request_workers=1000,
        **WAF)
