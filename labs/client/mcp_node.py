"""The official MCP TypeScript SDK's client as a measuring client: proxies/apps/node/mcp-client.mjs
(npm `@modelcontextprotocol/sdk`'s `Client` over its `StreamableHTTPClientTransport`) opens one
session, and this side builds from the lines it prints the same record the Python SDK's client
gives (`labs.client.mcp_session.McpResult`), so a check reads either alike.

    outcome = await measure_node_session("http://127.0.0.1:8080/mcp", calls=2, hold_s=3)
    outcome.statuses, outcome.calls[0].first_progress_s, outcome.logged, outcome.error

What differs from the Python client, read from the SDK's source (1.32.2, dist/esm/client/):
- it speaks the 2025 revisions only: `Client.connect` always sends `initialize` (no `modern` mode);
- Node's fetch keeps no cookies, so `cookies` stays empty and a balancer's affinity cookie is
  never sent back;
- what it does not throw it reports to `onerror` (a cut GET stream: `SSE stream disconnected:
  TypeError: terminated`), kept in `logged`; the Python SDK logs those at debug level only.
Times are taken inside Node (`performance.now()`), as the Python client takes them in-process.
"""
from __future__ import annotations

import json
from contextlib import closing
from typing import Any

import anyio.to_thread

from labs.client.mcp_session import DEFAULT_TOOL, McpCall, McpResult, Mode
from labs.client.node_process import json_lines
from proxies.apps.nodejs import NODE_DIR

SCRIPT = NODE_DIR / "mcp-client.mjs"
# Past the session's own limit, Node is given this long to print its end before it is killed.
GRACE_S = 10.0


async def measure_node_session(url: str, *, mode: Mode = "legacy", calls: int = 1, tool: str = DEFAULT_TOOL,
                               arguments: dict[str, Any] | None = None, timeout_s: float = 30.0,
                               headers: dict[str, str] | None = None, hold_s: float = 0.0,
                               body_timeout_s: float | None = None) -> McpResult:
    """`labs.client.mcp_session.measure_session` through the TypeScript SDK (its arguments, less
    `modern` mode, which labs.scenario.mcp_clients refuses); `body_timeout_s`: undici's `bodyTimeout`
    on every request (None: Node's 300 s). Never raises for what the server or a hop did."""
    options = {"calls": calls, "tool": tool, "arguments": arguments or {}, "timeout_s": timeout_s,
               "hold_s": hold_s, "headers": headers or {},
               "body_timeout_ms": None if body_timeout_s is None else round(body_timeout_s * 1000)}
    return await anyio.to_thread.run_sync(lambda: _session(url, options, timeout_s + GRACE_S))


def _session(url: str, options: dict[str, Any], hard_limit_s: float) -> McpResult:
    outcome = McpResult(url=url, mode="legacy")
    calls: dict[int, McpCall] = {}
    try:
        with closing(json_lines(SCRIPT, [url, json.dumps(options)], hard_limit_s=hard_limit_s)) as lines:
            for line in lines:
                _read(line, outcome, calls)
    except (RuntimeError, ValueError) as exc:  # Node died or printed what is not JSON: the lab's fault, shown
        outcome.error = outcome.error or f"the Node client failed: {exc}"
    outcome.session_id = outcome.session_id or next((session for _, _, session in outcome.responses if session), None)
    # The SDK reports a failed POST to onerror and throws it too: only what it did not throw stays.
    thrown = {outcome.error, *(call.error for call in outcome.calls)}
    outcome.logged = [(message, at) for message, at in outcome.logged if message not in thrown]
    return outcome


def _read(line: dict[str, Any], outcome: McpResult, calls: dict[int, McpCall]) -> None:
    """One line of mcp-client.mjs into the record (its header comment lists the lines)."""
    if "response" in line:
        method, status, session = line["response"]
        reopened = method == "GET" and any(earlier == "GET" for earlier, _, _ in outcome.responses)
        outcome.reconnects += reopened or bool(line.get("last_event_id"))
        outcome.responses.append((method, int(status), session))
    elif "opened" in line:
        outcome.opened, outcome.session_id = True, line["opened"]
    elif "sent" in line:
        calls[line["call"]] = McpCall(sent_at_s=line["sent"])
        outcome.calls.append(calls[line["call"]])
    elif "progress" in line:
        calls[line["progress"]].progress_at_s.append(line["t"])
    elif "result" in line:
        calls[line["result"]].result, calls[line["result"]].elapsed_s = line["text"], line["elapsed"]
    elif "call_error" in line:
        call = calls[line["call_error"]]
        call.error, call.elapsed_s = line["message"], line["elapsed"]
        outcome.error = outcome.error or call.error
    elif "notification" in line:
        outcome.notifications.append((line["notification"], line["t"]))
    elif "logged" in line:
        outcome.logged.append((line["logged"], line["t"]))
    elif "error" in line:
        outcome.error = outcome.error or line["error"]
    elif "end" in line:
        outcome.elapsed_s = line["t"]
