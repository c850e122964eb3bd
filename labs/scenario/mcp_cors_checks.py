"""Checks on a browser MCP client's run through CORS (mcp-cors-expose): the session as the
TypeScript SDK saw it in Chromium (labs/scenario/mcp_browser.py) and what the replica recorded.

Each side proves its precondition: the page ran on another origin than the MCP route (so the
browser applied CORS at all), Chromium sent a preflight, and a stateful origin really issued a
session id (so a hidden one is the hop's doing, not a server that gave none).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from labs.scenario.mcp_model import McpCheck, McpRun

# What mcp 2.3's server answers (400) to a request without a session id on a stateful session
# (mcp/server/streamable_http_manager.py), measured; the TypeScript SDK's own server says
# "Bad Request: No valid session ID provided" instead.
MISSING_SESSION = "Missing session ID"
# What Chromium's fetch rejects with when CORS withholds a response (a refused preflight).
FAILED_TO_FETCH = "Failed to fetch"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def ran_cross_origin() -> McpCheck:
    """Every session ran in a page whose origin is not the MCP route's: the browser applied CORS."""
    def measure(run: McpRun) -> tuple[str, bool]:
        pages = [(getattr(s, "page_origin", ""), _origin(s.url)) for s in run.sessions]
        return (f"page -> route: {', '.join(f'{page or None} -> {route}' for page, route in pages)}",
                bool(pages) and all(page and page != route for page, route in pages))
    return McpCheck("the SDK ran in Chromium on a page of another origin than the MCP route", measure)


def preflighted(answered: str = "ok") -> McpCheck:
    """Chromium sent CORS preflights; `ok`: every one answered 2xx; `refused`: at least one not."""
    def measure(run: McpRun) -> tuple[str, bool]:
        statuses = [status for s in run.sessions for status in getattr(s, "preflights", [])]
        refused = [status for status in statuses if not 200 <= status < 300]
        return (f"preflight statuses {statuses}",
                bool(statuses) and (not refused if answered == "ok" else bool(refused)))
    words = "every one allowed" if answered == "ok" else "one refused"
    return McpCheck(f"Chromium sent a CORS preflight, {words}", measure)


def origin_issued_session(issued: bool = True) -> McpCheck:
    """The replica answered initialize 200 with an Mcp-Session-Id (stateful), or without one."""
    def measure(run: McpRun) -> tuple[str, bool]:
        answers = [r for r in run.requests if r["method"] == "initialize" and r["status"] == 200]
        given = [r["session"] for r in answers if r["session"]]
        return (f"{len(answers)} initialize answered 200, {len(given)} with a session id; {run.counts()}",
                bool(answers) and (len(given) == len(answers) if issued else not given))
    return McpCheck("the origin answered initialize with a session id" if issued
                    else "the origin answered initialize with no session id (stateless)", measure)


def session_hidden_then_missing() -> McpCheck:
    """The symptom: the page could not read the session id, so the SDK sent its next request
    without one and the origin refused it with 400, before any tool call returned."""
    def measure(run: McpRun) -> tuple[str, bool]:
        hidden = sum(getattr(s, "readable_session", "x") is None and s.session_id is None for s in run.sessions)
        refused = [r for r in run.requests if r["status"] == 400 and r["method"] != "initialize"]
        failed = sum(MISSING_SESSION in (s.error or "") for s in run.sessions)
        returned = sum(call.result is not None for s in run.sessions for call in s.calls)
        return (f"{hidden}/{len(run.sessions)} sessions read no id, origin answered 400 to "
                f"{[r['method'] for r in refused]}, {failed} ended with '{MISSING_SESSION}', {returned} calls "
                f"returned; errors: {sorted({s.error for s in run.sessions if s.error})}",
                bool(run.sessions) and hidden == failed == len(run.sessions) and bool(refused) and returned == 0)
    return McpCheck(f"the page reads no Mcp-Session-Id; the next request goes without it: 400 "
                    f"'{MISSING_SESSION}'", measure)


def session_read_and_sent() -> McpCheck:
    """The cure's proof: the page read the id the origin issued and sent it on every later request."""
    def measure(run: McpRun) -> tuple[str, bool]:
        issued = {r["session"] for r in run.requests if r["method"] == "initialize" and r["session"]}
        read = {s.session_id for s in run.sessions}
        later = [r for r in run.requests if r["method"] not in ("initialize", None) or r["http_method"] in ("GET", "DELETE")]
        carried = sum(r["session"] in issued for r in later)
        return (f"issued {len(issued)}, read by the page {len(read & issued)}, {carried}/{len(later)} later "
                f"requests carried it", bool(issued) and read == issued and bool(later) and carried == len(later))
    return McpCheck("the page read the issued Mcp-Session-Id and every later request carried it", measure)


def refused_by_the_browser() -> McpCheck:
    """A look-alike's outcome: the id was readable, but a later request's preflight was refused, so
    Chromium never sent it and the SDK saw 'Failed to fetch'; no tool call returned."""
    def measure(run: McpRun) -> tuple[str, bool]:
        read = sum(getattr(s, "readable_session", None) is not None for s in run.sessions)
        failed = sum(FAILED_TO_FETCH in (s.error or "") for s in run.sessions)
        returned = sum(call.result is not None for s in run.sessions for call in s.calls)
        refused = sorted({line for s in run.sessions for line in getattr(s, "refused", [])})
        return (f"{read}/{len(run.sessions)} read the id, {failed} ended with '{FAILED_TO_FETCH}', {returned} calls "
                f"returned; refused by the browser: {refused}",
                bool(run.sessions) and read == failed == len(run.sessions) and returned == 0)
    return McpCheck(f"the page reads the id, then the browser refuses the next request: '{FAILED_TO_FETCH}'",
                    measure)
