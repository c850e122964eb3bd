"""The official MCP TypeScript SDK's client in Chromium, on a page of another origin than the MCP
route: what a browser MCP client (an agent UI, the MCP Inspector) sees through CORS.

The SDK is bundled for the browser by webpack (proxies/apps/node/mcp-browser/, built by need into
an ignored folder: `python -m proxies.apps.install mcp-browser`). A real loopback HTTP server
serves the page and the bundle on a port of its own, so the page's origin is another than the
proxy's and every request of the SDK is cross-origin: Chromium sends its CORS preflights and hides
each response header that is neither safelisted nor exposed. (A page fulfilled by Playwright's
`page.route`, as labs/scenario/chromium.py serves the browser scenarios' same-origin pages, has no
address, and Chromium refuses its requests to loopback as Local Network Access.) Chromium is the
browser scenarios' (chromium.launch_options); the preflights are read from its DevTools protocol,
since a page never sees them.

    result = run_async(browser_session("http://127.0.0.1:8080/mcp", calls=1))
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

from labs.client.mcp_session import McpCall, McpResult
from labs.scenario.chromium import ChromiumMissing, chromium_path, launch_options
from proxies.apps.nodejs import MCP_BROWSER_BUNDLE as BUNDLE

BUNDLE_PATH = "/mcp-client.js"
PAGE_HTML = (f"<!doctype html><meta charset=utf-8><title>streamlab MCP browser client</title>"
             f"<script src={BUNDLE_PATH}></script>").encode()


@dataclass
class BrowserMcpResult(McpResult):
    """A session as the SDK saw it in the page, plus what only the browser knows."""

    page_origin: str = ""  # where the page ran (location.origin)
    preflights: list[int] = field(default_factory=list)  # the status of each CORS preflight Chromium sent
    # Requests whose response the browser withheld from the SDK (a refused preflight, or no
    # Access-Control-Allow-Origin): "POST notifications/initialized: Failed to fetch".
    refused: list[str] = field(default_factory=list)
    # The Mcp-Session-Id the page's JavaScript could read off initialize's response (None: hidden).
    readable_session: str | None = None


def missing() -> str | None:
    """What is not installed for a browser session (one line), None when all is there."""
    if not BUNDLE.exists():
        return f"{BUNDLE} is missing: python -m proxies.apps.install mcp-browser"
    try:
        chromium_path()
    except ChromiumMissing as exc:
        return str(exc)
    return None


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        found = {"/": (PAGE_HTML, "text/html; charset=utf-8"),
                 BUNDLE_PATH: (BUNDLE.read_bytes(), "text/javascript")}.get(self.path)
        if found is None:
            self.send_error(404)
            return
        body, kind = found
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # the page's two requests are no news
        pass


@contextmanager
def page_server() -> Iterator[str]:
    """The page and the bundle on a free loopback port; yields the page's origin."""
    if problem := missing():
        raise FileNotFoundError(problem)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    thread = threading.Thread(target=server.serve_forever, name="mcp-browser-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def browser_session(url: str, *, calls: int = 1, timeout_s: float = 30.0) -> BrowserMcpResult:
    """One session of the SDK's client in Chromium, from a page on another origin than `url`.
    Never raises for what the server or a hop did (that is the measurement)."""
    from playwright.async_api import async_playwright

    preflights: list[int] = []
    with page_server() as origin:
        async with async_playwright() as playwright:
            chromium = await playwright.chromium.launch(**launch_options())
            try:
                page = await (await chromium.new_context()).new_page()
                devtools = await page.context.new_cdp_session(page)
                await devtools.send("Network.enable")
                devtools.on("Network.responseReceived", lambda event: preflights.append(
                    int(event["response"]["status"])) if event.get("type") == "Preflight" else None)
                await page.goto(origin + "/")
                raw = await page.evaluate("(spec) => StreamlabMcp.runSession(spec)",
                                          {"url": url, "calls": calls, "timeoutMs": timeout_s * 1000})
            finally:
                await chromium.close()
    return from_page(raw, preflights)


def from_page(raw: dict[str, Any], preflights: list[int]) -> BrowserMcpResult:
    """The page's record (mcp-browser/index.js) as the lab's McpResult."""
    requests = raw.get("requests", [])
    answered = [r for r in requests if r.get("status") is not None]
    return BrowserMcpResult(
        url=raw["url"], mode="legacy", session_id=raw.get("sessionId"), opened=bool(raw.get("opened")),
        calls=[McpCall(sent_at_s=c["sent_at_s"], progress_at_s=list(c["progress_at_s"]), result=c.get("result"),
                       error=c.get("error"), elapsed_s=c.get("elapsed_s")) for c in raw.get("calls", [])],
        responses=[(r["method"], int(r["status"]), r.get("sentSession") or r.get("readableSession"))
                   for r in answered],
        error=raw.get("error"), elapsed_s=float(raw.get("elapsed_s") or 0.0),
        page_origin=raw.get("pageOrigin", ""), preflights=preflights,
        refused=[f"{r['method']} {r.get('rpc') or ''}: {r.get('error')}".replace(" :", ":")
                 for r in requests if r.get("status") is None],
        readable_session=next((r.get("readableSession") for r in answered if r.get("rpc") == "initialize"), None))
