"""The official MCP TypeScript SDK as a measuring client (labs/client/mcp_node.py), against the lab's
origin directly, and the checks of its scenario rows in both directions on hand-made runs."""
from __future__ import annotations

import pytest

from labs import catalogue
from labs.scenario.mcp_clients import MCP_CLIENTS, McpClientName, measure
from labs.client.mcp_session import McpCall, McpResult
from labs.scenario import mcp_checks, mcp_stream_checks
from labs.scenario.mcp_model import McpRun, McpScenario
from server.mcp.knobs import OriginKnobs
from server.mcp.replicas import running_replicas
from server.processes import free_port
from server.signals import run_async

TS: McpClientName = "typescript-sdk"


def test_one_session_is_recorded_as_the_python_client_records_it() -> None:
    """Two paced tool calls: the same record as the Python SDK's client gives, read off the
    TypeScript SDK (statuses through its fetch option, progress through onprogress)."""
    with running_replicas(1, OriginKnobs(duration_s=0.5, progress_interval_s=0.05)) as replicas:
        outcome = run_async(measure(TS, replicas.url(), calls=2))
        requests = replicas.requests()
    assert outcome.completed, outcome.error
    assert outcome.session_id and {r["session"] for r in requests} == {outcome.session_id}
    # initialize, the initialized notification (202), the GET stream, two calls, the DELETE.
    assert sorted(outcome.responses) == sorted((r["http_method"], r["status"], r["session"]) for r in requests)
    assert outcome.responses[-1][:2] == ("DELETE", 200) and outcome.reconnects == 0 and not outcome.logged
    for call in outcome.calls:
        assert len(call.progress_at_s) == 10 and call.result and "replica 0" in call.result
        assert call.first_progress_s is not None and call.first_progress_s < 0.25  # the first step, not the end
        assert max(call.gaps_s) < 0.25 and call.elapsed_s is not None and call.elapsed_s >= 0.5
    assert outcome.cookies == {}  # Node's fetch keeps none


def test_a_server_that_is_not_there_is_measured_not_raised() -> None:
    outcome = run_async(measure(TS, f"http://127.0.0.1:{free_port()}/mcp", timeout_s=5))
    assert not outcome.opened and not outcome.completed and outcome.error and "fetch failed" in outcome.error
    assert outcome.error not in [message for message, _ in outcome.logged]  # thrown, so not "logged" too


def test_the_2026_handshake_is_refused_for_the_typescript_client() -> None:
    assert MCP_CLIENTS[TS].modes == ("legacy",)
    with pytest.raises(ValueError, match="typescript-sdk"):
        run_async(measure(TS, "http://127.0.0.1:1/mcp", mode="modern"))


@pytest.mark.parametrize(("keepalive_s", "cut"), [(0.0, True), (0.3, False)])
def test_node_fetch_s_body_timeout_cuts_a_silent_get_stream_and_the_sdk_reopens_it(keepalive_s: float,
                                                                                    cut: bool) -> None:
    """undici's bodyTimeout (1 s here, 300 s in Node) cuts the GET stream when the origin is silent,
    the SDK reports it to onerror and reopens it 1 s later; pings every 0.3 s keep one stream."""
    with running_replicas(1, OriginKnobs(duration_s=0.1, keepalive_s=keepalive_s)) as replicas:
        outcome = run_async(measure(TS, replicas.url(), hold_s=3.0, body_timeout_s=1.0))
        gets = [r for r in replicas.requests() if r["http_method"] == "GET"]
    assert outcome.completed, outcome.error
    logged = [message for message, _ in outcome.logged]
    if cut:
        assert logged and all(message == "Error: SSE stream disconnected: TypeError: terminated" for message in logged)
        assert len(gets) >= 2 and outcome.reconnects == len(gets) - 1
        assert gets[1]["at"] - gets[0]["at"] >= 2.0 - mcp_stream_checks.TIMER_SLACK_S  # the cut, then 1 s
    else:
        assert not logged and len(gets) == 1 and outcome.reconnects == 0


def _session(opened: bool, statuses: list[int], error: str | None, logged: int = 0) -> McpResult:
    calls = [McpCall(0.1, [0.05], "done", None, 0.6)] if opened else []
    return McpResult(url="u", mode="legacy", session_id="a", opened=opened, calls=calls,
                     responses=[("POST", status, "a") for status in statuses], error=error,
                     logged=[("Error: SSE stream disconnected: TypeError: terminated", 1.0)] * logged)


NOT_FOUND = 'StreamableHTTPError: Streamable HTTP error: Error POSTing to endpoint: {"message":"Session not found"}'


def _request(replica: int, method: str | None, status: int | None, at: float = 0.0,
             http_method: str = "POST") -> dict[str, object]:
    return {"replica": replica, "at": at, "http_method": http_method, "method": method, "tool": None,
            "session": "a" if status is not None else None, "status": status}


def test_a_refusal_at_connect_is_told_from_one_at_the_tool_call() -> None:
    checks = (mcp_checks.sessions_refused_at_connect(),
              mcp_checks.not_found_from_another_replica("notifications/initialized"))
    split = [_request(0, "initialize", 200), _request(1, "notifications/initialized", 404)]
    at_connect = McpRun("nginx", "typescript-client", [_session(False, [200, 404], NOT_FOUND)], split, 2)
    assert all(check(at_connect).passed for check in checks)
    # The Python client's shape: opened, then refused at its tool call; not this row's symptom.
    later = McpRun("nginx", "typescript-client", [_session(True, [200, 202, 404], "MCPError: Session not found")],
                   [_request(0, "initialize", 200), _request(1, "tools/call", 404)], 2)
    assert not any(check(later).passed for check in checks)
    # Refused by the replica that holds the session (an expired session): not the balancer's split.
    alone = McpRun("nginx", "typescript-client", at_connect.sessions,
                   [_request(0, "initialize", 200), _request(0, "notifications/initialized", 404)], 1)
    assert not checks[1](alone).passed


def _idle(get_at: list[float], sent_at: float, received: bool, logged: int) -> McpRun:
    session = _session(True, [200], None, logged)
    session.notifications = [("notifications/tools/list_changed", sent_at)] if received else []
    requests = [*(_request(0, None, 200, at, "GET") for at in get_at),
                _request(0, "notifications/tools/list_changed", None, sent_at, "SERVER")]
    return McpRun("nginx", "typescript-client", [session], requests, 1)


def test_the_typescript_idle_rows_need_every_reopening_and_a_notification_sent_while_down() -> None:
    scenario = catalogue.find("mcp-idle-stream")
    assert isinstance(scenario, McpScenario)
    checks = scenario.fix("typescript-client").cure_checks
    assert all(check(_idle([0.0, 2.0, 4.0], 3.5, False, logged=2)).passed for check in checks)
    # Abandoned after two opens, as the Python client does: not this client.
    assert not all(check(_idle([0.0, 2.0], 3.5, False, logged=1)).passed for check in checks)
    # Reopened late (3 s after a 1 s cut): not at each cut.
    assert not all(check(_idle([0.0, 3.1, 6.2], 1.5, False, logged=2)).passed for check in checks)
    # Sent while a stream was open: its loss would prove nothing; received: nothing lost.
    assert not all(check(_idle([0.0, 2.0, 4.0], 2.5, False, logged=2)).passed for check in checks)
    assert not all(check(_idle([0.0, 2.0, 4.0], 3.5, True, logged=2)).passed for check in checks)
    # The SDK reported no cut: the stream ended some other way.
    assert not all(check(_idle([0.0, 2.0, 4.0], 3.5, False, logged=0)).passed for check in checks)
