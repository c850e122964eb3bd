"""The official MCP Python SDK's client as the lab's measuring client for MCP over Streamable HTTP.

One session, as an agent's runtime opens it: `mcp.client.streamable_http.streamable_http_client`
and `mcp.client.session.ClientSession`, the SDK's own transport and session, nothing re-written.
It opens the session (`legacy`: the 2025 revisions' `initialize` handshake, which hands out an
`Mcp-Session-Id`; `modern`: the 2026-07-28 revision's `server/discover`, no session), calls a tool
a few times with a progress callback, and records what the user of the SDK would see: when each
progress notification arrived, the result, the session id, the HTTP status of every response
(read off the SDK's own HTTP client through httpx2's event hooks), how the session ended (the
SDK's exception text, e.g. a 404's "Session not found"), the cookies its HTTP client kept, and
how often it reconnected (its standalone GET stream reopened, or a stream resumed with
`Last-Event-ID`).

    python -m labs.client.mcp_session http://127.0.0.1:8080/mcp --calls 2 --mode legacy

prints the record as JSON (exit 0 when every call returned, 1 when the session failed, 2 when the
command itself was wrong).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Sequence

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

Mode = Literal["legacy", "modern"]
MODES: tuple[Mode, ...] = ("legacy", "modern")
SESSION_HEADER = "mcp-session-id"
DEFAULT_TOOL = "slow_task"
PROGRESS = "notifications/progress"


@dataclass
class McpCall:
    """One tool call: when it was sent, its progress notifications, how it ended."""

    sent_at_s: float  # seconds after the session began
    progress_at_s: list[float] = field(default_factory=list)  # each notification, after the call was sent
    result: str | None = None
    error: str | None = None
    elapsed_s: float | None = None

    @property
    def first_progress_s(self) -> float | None:
        return self.progress_at_s[0] if self.progress_at_s else None

    @property
    def gaps_s(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.progress_at_s, self.progress_at_s[1:])]


@dataclass
class McpResult:
    """What one session through the official client saw."""

    url: str
    mode: Mode
    session_id: str | None = None
    opened: bool = False  # initialize (or discover) answered
    calls: list[McpCall] = field(default_factory=list)
    # Every HTTP response the SDK's client received, in order: (method, status, session id it carried).
    responses: list[tuple[str, int, str | None]] = field(default_factory=list)
    reconnects: int = 0
    # Each server notification that was not a tool's progress (the standalone GET stream's own,
    # e.g. notifications/tools/list_changed): (its method, seconds after the session began).
    notifications: list[tuple[str, float]] = field(default_factory=list)
    cookies: dict[str, str] = field(default_factory=dict)
    # When each standalone GET's response headers reached the client (wall clock, time.time(), so a
    # scenario compares it with the origin's record of sending them), and the HTTP version spoken.
    get_headers_at: list[float] = field(default_factory=list)
    http_version: str = ""
    # What the SDK reported without raising it, (its words, seconds after the session began): the
    # TypeScript SDK's `onerror` (a cut GET stream, its reconnects given up); the Python SDK logs
    # those at debug level only, so its sessions leave this empty.
    logged: list[tuple[str, float]] = field(default_factory=list)
    error: str | None = None  # how the session ended, when it did not end well: the SDK's own text
    elapsed_s: float = 0.0

    @property
    def completed(self) -> bool:
        """Opened, and every tool call returned its result."""
        return self.opened and bool(self.calls) and all(call.result is not None for call in self.calls) \
            and self.error is None

    @property
    def statuses(self) -> list[int]:
        return [status for _, status, _ in self.responses]

    def as_dict(self) -> dict[str, Any]:
        shown = asdict(self)
        shown["completed"] = self.completed
        for call, raw in zip(self.calls, shown["calls"]):
            raw["first_progress_s"] = call.first_progress_s
            raw["max_gap_s"] = max(call.gaps_s, default=None)
        return shown


async def measure_session(url: str, *, mode: Mode = "legacy", calls: int = 1, tool: str | None = DEFAULT_TOOL,
                          arguments: dict[str, Any] | None = None, timeout_s: float = 30.0,
                          headers: dict[str, str] | None = None, hold_s: float = 0.0,
                          verify_tls: bool = True, http2: bool = False) -> McpResult:
    """Open one session on `url`, call `tool` `calls` times, one after another (`tool=None`: list
    the tools instead, a request with no side effect on a server the lab does not own; each call's
    result is then the tool names), then stay in the session `hold_s` seconds more with nothing to
    send, listening for server notifications as an idle agent does; never raises for what the server or a hop did (that is the
    measurement), only for a wrong argument. `verify_tls` False: a self-signed certificate is
    accepted (`labs probe --insecure`, verify's certificate made for the run). `http2`: the SDK's
    httpx2 client speaks HTTP/2, by ALPN over https (mcp-held-headers)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    outcome = McpResult(url=url, mode=mode)
    began = time.monotonic()

    async def seen(response: httpx2.Response) -> None:
        session = response.headers.get(SESSION_HEADER) or response.request.headers.get(SESSION_HEADER)
        # The SDK reopens its standalone GET stream on its own when it ends or fails (after the
        # server's `retry:` or 1 s; it gives up after 2 failures in a row, logged at debug only),
        # and resumes a cut POST stream with a GET carrying Last-Event-ID: each is a reconnect.
        reopened = response.request.method == "GET" and any(method == "GET" for method, _, _ in outcome.responses)
        if reopened or "last-event-id" in response.request.headers:
            outcome.reconnects += 1
        outcome.responses.append((response.request.method, response.status_code, session))
        outcome.http_version = response.http_version
        if response.request.method == "GET":
            outcome.get_headers_at.append(time.time())

    async def notified(message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str) and method != PROGRESS:
            outcome.notifications.append((method, time.monotonic() - began))

    http = create_mcp_http_client(headers=headers)
    if not verify_tls or http2:  # the SDK's factory takes neither `verify` nor `http2`: the same client with them
        http = httpx2.AsyncClient(timeout=http.timeout, headers=headers, verify=verify_tls, http2=http2)
    http.event_hooks["response"] = [seen]
    try:
        with anyio.fail_after(timeout_s):
            async with http, streamable_http_client(url, http_client=http) as (read, write), \
                    ClientSession(read, write, message_handler=notified) as session:
                if mode == "legacy":
                    await session.initialize()
                else:
                    await session.discover()
                outcome.opened = True
                outcome.session_id = _session_of(outcome.responses)
                for _ in range(calls):
                    call = McpCall(sent_at_s=time.monotonic() - began)
                    outcome.calls.append(call)
                    await _call(session, tool, arguments, call, began)
                    if call.error is not None:
                        outcome.error = call.error
                        break
                if outcome.error is None:
                    await anyio.sleep(hold_s)
                outcome.cookies = dict(http.cookies.items())
    except BaseException as exc:  # the SDK's exception is the measurement; a stop signal is not
        if not isinstance(exc, Exception) and not _only_errors(exc):
            raise
        outcome.error = outcome.error or _describe(exc)
    outcome.session_id = outcome.session_id or _session_of(outcome.responses)
    outcome.elapsed_s = time.monotonic() - began
    return outcome


async def _call(session: ClientSession, tool: str | None, arguments: dict[str, Any] | None, call: McpCall,
                began: float) -> None:
    sent = time.monotonic()

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        call.progress_at_s.append(time.monotonic() - sent)

    try:
        if tool is None:
            listed = await session.list_tools()
            call.result = " ".join(item.name for item in listed.tools)
        else:
            result = await session.call_tool(tool, arguments or {}, progress_callback=progressed)
            text = " ".join(getattr(part, "text", "") for part in result.content)
            call.result, call.error = (None, f"the tool failed: {text}") if result.is_error else (text, None)
    except Exception as exc:  # noqa: BLE001 - what the SDK raised is what its user would see
        call.error = _describe(exc)
    call.elapsed_s = time.monotonic() - sent


def _session_of(responses: Sequence[tuple[str, int, str | None]]) -> str | None:
    return next((session for _, _, session in responses if session), None)


def _only_errors(group: BaseException) -> bool:
    """An exception group of ordinary errors only (the SDK's task groups raise those)."""
    inner = getattr(group, "exceptions", None)
    return inner is not None and all(isinstance(exc, Exception) or _only_errors(exc) for exc in inner)


def _describe(exc: BaseException) -> str:
    """The SDK's own words: the innermost error of a task group, its type and its text."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, TimeoutError):
        return "timed out (the lab's own limit on the session)"
    return f"{type(exc).__name__}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    parse = argparse.ArgumentParser(prog="python -m labs.client.mcp_session",
                                    description="One MCP session through the official Python SDK client, "
                                                "measured.")
    parse.add_argument("url", help="the MCP endpoint, e.g. http://127.0.0.1:8080/mcp")
    parse.add_argument("--mode", choices=MODES, default="legacy",
                       help="legacy: the initialize handshake and a session; modern: 2026-07-28, no session")
    parse.add_argument("--calls", type=int, default=1, help="tool calls, one after another")
    parse.add_argument("--tool", default=DEFAULT_TOOL)
    parse.add_argument("--timeout-s", type=float, default=30.0)
    args = parse.parse_args(argv)
    if args.calls < 1 or args.timeout_s <= 0 or not args.url.startswith(("http://", "https://")):
        print("python -m labs.client.mcp_session: error: an http(s) URL, --calls 1 or more and a "
              "positive --timeout-s", file=sys.stderr)
        return 2
    outcome = anyio.run(lambda: measure_session(args.url, mode=args.mode, calls=args.calls, tool=args.tool,
                                                timeout_s=args.timeout_s))
    print(json.dumps(outcome.as_dict(), indent=2))
    return 0 if outcome.completed else 1


if __name__ == "__main__":
    sys.exit(main())
