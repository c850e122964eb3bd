"""CORS answered by a proxy for a page on another origin (a browser MCP client, labs/catalogue/mcp.py's
mcp-cors-expose): the settings each proxy that can add it shares, declared once; each template
writes them in its own directives (nginx `add_header ... always`, HAProxy `http-after-response
set-header` and `http-request return` for the preflight)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from proxies.base import setting
from proxies.types import CorsOrigin, HeaderName

FETCH = "https://fetch.spec.whatwg.org"
# The request headers a browser MCP client sends besides the safelisted ones, after initialize
# (the Streamable HTTP transport: https://modelcontextprotocol.io/specification/2025-11-25/basic/transports).
MCP_REQUEST_HEADERS = ("content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id")


class CorsSettings(BaseModel):
    """Mixed into a proxy's settings: nothing is written while `cors_allow_origin` is None."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    cors_allow_origin: CorsOrigin | None = setting(
        None, "add `Access-Control-Allow-Origin` with this origin (and the methods and headers below) to "
              "every answer, errors too, and answer a preflight (OPTIONS) with 204 at the proxy; None: "
              "the proxy adds nothing", f"{FETCH}#http-access-control-allow-origin")
    cors_allow_headers: tuple[HeaderName, ...] = setting(
        MCP_REQUEST_HEADERS, "with cors_allow_origin: the request headers a preflight allows "
                             "(`Access-Control-Allow-Headers`)", f"{FETCH}#http-access-control-allow-headers")
    cors_expose_headers: tuple[HeaderName, ...] = setting(
        (), "with cors_allow_origin: the response headers a page's JavaScript may read besides the "
            "safelisted ones (`Access-Control-Expose-Headers`; a browser MCP client needs `Mcp-Session-Id`)",
        f"{FETCH}#http-access-control-expose-headers")
