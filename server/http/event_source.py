"""`GET /v1/chat/completions?request=JSON`: the form of the API a browser's EventSource can call.

EventSource sends only GET, without a body, so the chat-completion request travels as JSON in
the `request` query parameter (URL-encoded); everything else is the POST route's. On a
reconnection it sends `Last-Event-ID` (see `event_ids`, server/stream/sse_writer.py).

A GET is a request any web page may send cross-site without asking (an `<img>`, a `fetch` in
no-cors mode), which the POST route refuses by its JSON Content-Type. So a GET from a browser
must come from the server's own origin or from a `--cors-origin`: browsers say where a request
comes from in `Sec-Fetch-Site` (and `Origin`); a client that is no browser sends neither.
"""
from __future__ import annotations

from starlette.requests import Request

from server.errors import APIError

QUERY_PARAMETER = "request"
LAST_EVENT_ID = "last-event-id"
# What a browser calls a request from the page's own origin, or one the user typed.
OWN_SITES = ("same-origin", "none")


def body_from_query(request: Request, allowed_origins: tuple[str, ...]) -> bytes:
    """The JSON body a GET carries, after the cross-site check (403) and a presence check (400)."""
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None and site not in OWN_SITES and origin not in allowed_origins:
        raise APIError(403, f"a cross-site GET from {origin or 'a page'} may not start a "
                       "generation: start the server with --cors-origin ORIGIN for that page",
                       type="permission_error", code="cross_site_request")
    text = request.query_params.get(QUERY_PARAMETER)
    if not text:
        raise APIError(400, f"GET /v1/chat/completions needs the request as JSON in the "
                       f"`{QUERY_PARAMETER}` query parameter (EventSource's form of the POST)",
                       param=QUERY_PARAMETER, code="missing_request")
    return text.encode()
