"""One MCP origin process: the official SDK's server (`mcp.server.mcpserver.MCPServer`) with a slow
tool that reports progress, its Streamable HTTP app at `/mcp`, and a record of every request.

The record is what a scenario counts: `GET /lab/requests` answers every request this process saw
on `/mcp` (its replica number, the HTTP method, the JSON-RPC method, the tool's name, the session
id it carried or was given, the status it was answered with), oldest first; `/healthz` says it
is up. Neither is part of MCP; both are loopback-only like everything the lab binds.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import anyio
try:  # mcp 2.x, the lab's venv
    from mcp.server.mcpserver import Context, MCPServer
    SDK_2 = True
except ImportError:  # mcp 1.x, its own venv (server/mcp/sdks.py): the same server named FastMCP
    from mcp.server.fastmcp import Context, FastMCP as MCPServer  # type: ignore[attr-defined,assignment,no-redef]
    SDK_2 = False
from mcp.server.transport_security import TransportSecuritySettings
from sse_starlette import EventSourceResponse
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.mcp.events import MemoryEventStore
from server.mcp.knobs import SENT_BY_SERVER, OriginKnobs
from server.mcp.opening import OpenComment

MCP_PATH = "/mcp"
RECORDS_PATH = "/lab/requests"
HEALTH_PATH = "/healthz"
SLOW_TOOL = "slow_task"
SESSION_HEADER = b"mcp-session-id"
SERVER_NOTIFICATION = "notifications/tools/list_changed"


def build(knobs: OriginKnobs) -> "RecordingApp":
    """The ASGI app of one origin process with these knobs."""
    # The SDK builds each SSE response with sse-starlette's default ping interval (it passes
    # none); 0 turns the pings off (sse-starlette skips its ping task then, Issue #206).
    EventSourceResponse.DEFAULT_PING_INTERVAL = knobs.keepalive_s  # type: ignore[assignment]
    # The SDK turns on its DNS-rebinding check (Host must be 127.0.0.1:*, else 421) when told it
    # binds loopback (mcp/server/lowlevel/server.py); a deployed origin behind a proxy binds its
    # network address, where the check is off, and a proxy's Host (nginx: the upstream's name)
    # reaches it. The lab binds loopback for safety only, so it keeps the deployed behaviour.
    transport = dict(streamable_http_path=MCP_PATH, json_response=knobs.json_response,
                     stateless_http=not knobs.sessions,
                     event_store=MemoryEventStore() if knobs.resumable else None,
                     retry_interval=knobs.retry_ms or None,
                     transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    # 2.x takes the transport's settings when it builds the app, 1.x when it builds the server.
    server = MCPServer(name="streamlab-mcp-origin", version="1") if SDK_2 else \
        MCPServer(name="streamlab-mcp-origin", **transport)  # type: ignore[arg-type]

    records: list[dict[str, Any]] = []
    later: set[asyncio.Task[None]] = set()  # kept until done: the loop holds tasks weakly

    async def notify_later(session: Any) -> None:
        await anyio.sleep(knobs.notify_after_s)
        await session.send_tool_list_changed()  # no related request: the standalone GET stream's
        records.append({"replica": knobs.replica, "at": time.time(), "http_method": SENT_BY_SERVER,
                        "method": SERVER_NOTIFICATION, "tool": None, "session": None, "status": None})

    @server.tool(name=SLOW_TOOL, description="Works for a while, reporting progress as it goes.")
    async def slow_task(ctx: Context) -> str:
        steps = max(1, round(knobs.duration_s / knobs.progress_interval_s))
        await anyio.sleep(knobs.first_progress_delay_s)
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await anyio.sleep(knobs.progress_interval_s)
        if knobs.notify_after_s:
            task = asyncio.get_running_loop().create_task(notify_later(ctx.session))
            later.add(task)
            task.add_done_callback(later.discard)
        return f"done after {steps} steps on replica {knobs.replica}"

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @server.custom_route(RECORDS_PATH, methods=["GET"])
    async def recorded(request: Request) -> JSONResponse:
        return JSONResponse(records)

    app: ASGIApp = server.streamable_http_app(**transport) if SDK_2 else server.streamable_http_app()  # type: ignore[arg-type]
    # Inside the recorder, so a preflight (OPTIONS) the middleware answers is recorded too, and the
    # record's first body byte is the open comment, proof that it left the origin.
    opened = OpenComment(app) if knobs.open_comment else app
    return RecordingApp(with_cors(opened, knobs), knobs.replica, records)


def with_cors(app: ASGIApp, knobs: OriginKnobs) -> ASGIApp:
    """The app behind Starlette's CORSMiddleware as the SDK's README configures it for browser
    clients (python-sdk#1059: the MCP methods, `expose_headers`), when --cors-origin asks."""
    if not knobs.cors_origin:
        return app
    listed = lambda text: [name.strip() for name in text.split(",") if name.strip()]  # noqa: E731
    return CORSMiddleware(app, allow_origins=[knobs.cors_origin], allow_methods=["GET", "POST", "DELETE"],
                          allow_headers=listed(knobs.cors_allow_headers),
                          expose_headers=listed(knobs.cors_expose_headers))


class RecordingApp:
    """ASGI middleware: one record per request on `/mcp`, written when its status is sent; its
    `body_at` when the first body byte was (None: none yet), so a scenario sees a silence after
    the headers (`mcp-held-headers`)."""

    def __init__(self, app: ASGIApp, replica: int, records: list[dict[str, Any]]) -> None:
        self.app, self.replica, self.records = app, replica, records

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        body = bytearray()
        sent_session = dict(scope["headers"]).get(SESSION_HEADER)

        async def reading() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        mine: dict[str, Any] = {}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                given = dict(message.get("headers", [])).get(SESSION_HEADER)
                mine.update(record(self.replica, scope["method"], bytes(body), sent_session or given,
                                   int(message["status"])))
                self.records.append(mine)
            await send(message)
            if message["type"] == "http.response.body" and message.get("body") and mine.get("body_at") is None:
                mine["body_at"] = time.time()

        await self.app(scope, reading, sending)


def record(replica: int, http_method: str, body: bytes, session: bytes | None, status: int) -> dict[str, Any]:
    """One request as the scenario counts it (a body that is not one JSON-RPC message: no method)."""
    try:
        message = json.loads(body) if body else {}
    except ValueError:
        message = {}
    message = message if isinstance(message, dict) else {}
    raw_params = message.get("params")
    params = raw_params if isinstance(raw_params, dict) else {}
    return {"replica": replica, "at": time.time(), "http_method": http_method,
            "method": message.get("method"), "tool": params.get("name"),
            "session": session.decode("latin-1") if session else None, "status": status, "body_at": None}
