"""The proxies' own error answers, in the shape OpenAI SDKs parse: one table, read by every template.

    {"error": {"message": "...", "type": "server_error", "param": null, "code": "upstream_unavailable"}}

A proxy answers on its own when it refuses a request (too large, too slow, malformed) or cannot
reach the server. Its built-in pages are HTML (nginx, HAProxy) or plain text (Envoy); an SDK then
reports "unexpected response" instead of the reason. Only the proxy's OWN answers use this table:
the server's errors (already in this shape) pass through untouched.

Types follow OpenAI's: `invalid_request_error` for what the client must change (an SDK does not
retry it), `server_error` / `timeout` for what may pass (an SDK retries 408 and 5xx).
Messages contain no quote, backslash or `$`, so every config syntax can hold them verbatim.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

from proxies.base import setting

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"


@dataclass(frozen=True)
class ProxyError:
    status: int
    type: str
    code: str
    message: str

    def payload(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}

    def body(self) -> str:
        """The JSON text, on one line."""
        return json.dumps(self.payload())


ERRORS: dict[int, ProxyError] = {error.status: error for error in (
    ProxyError(400, INVALID_REQUEST, "bad_request", "The proxy could not parse the HTTP request."),
    ProxyError(403, INVALID_REQUEST, "forbidden", "The proxy refused the request."),
    ProxyError(408, TIMEOUT, "request_timeout",
               "The proxy did not receive the whole request in time."),
    ProxyError(411, INVALID_REQUEST, "length_required",
               "The proxy needs a Content-Length: send the body with one, not chunked."),
    ProxyError(413, INVALID_REQUEST, "request_too_large",
               "The request body is larger than the proxy accepts."),
    ProxyError(414, INVALID_REQUEST, "uri_too_long", "The request URI is longer than the proxy accepts."),
    ProxyError(431, INVALID_REQUEST, "headers_too_large",
               "The request headers are larger than the proxy accepts."),
    ProxyError(429, INVALID_REQUEST, "too_many_connections",
               "Too many connections from this client at the proxy."),
    ProxyError(500, SERVER_ERROR, "proxy_error", "The proxy failed while handling the request."),
    ProxyError(501, INVALID_REQUEST, "not_implemented", "The proxy does not support this request."),
    ProxyError(502, SERVER_ERROR, "upstream_unavailable",
               "The proxy could not get a valid answer from the model server."),
    ProxyError(503, SERVER_ERROR, "upstream_unavailable",
               "The model server is unavailable or overloaded behind the proxy."),
    ProxyError(504, TIMEOUT, "upstream_timeout", "The model server did not answer the proxy in time."),
)}
# Any other status the proxy itself produces (Envoy's local replies can carry any code).
FALLBACK_CLIENT = ProxyError(0, INVALID_REQUEST, "proxy_rejected", "The proxy rejected the request.")
FALLBACK_SERVER = ProxyError(0, SERVER_ERROR, "proxy_error", "The proxy failed while handling the request.")

_VERBATIM = re.compile(r"[A-Za-z0-9 .,;:()/_-]+")
assert all(_VERBATIM.fullmatch(e.message) and _VERBATIM.fullmatch(e.code)
           for e in (*ERRORS.values(), FALLBACK_CLIENT, FALLBACK_SERVER)), "unsafe text in ERRORS"


def errors_for(statuses: Iterable[int]) -> list[ProxyError]:
    """The table's entries for `statuses`, in order (a status missing from the table is a bug)."""
    return [ERRORS[status] for status in statuses]


def json_errors_setting(proxy: str, instead: str, url: str) -> Any:
    """The `json_errors` field of a proxy's settings: off by default (the proxy's own pages)."""
    return setting(False, f"answer {proxy}'s own errors (413, 502, 503, 504, ...) with "
                          f"OpenAI-shaped JSON (proxies/errors.py) instead of {instead}", url)
