"""A coding agent as a scenario's client (labs/client/agent_streams.py): the `lab` object as the
`X-Streamlab-Lab` header, the run reported as a StreamResult with the agent's exit status, error
line, retries and the server's record; and what Codex's own idle timer counts.

The server is tests/labs/conftest.py's `agent_server` (the synthetic engine, a 16,384-token context).
"""
from __future__ import annotations

from typing import Any

import pytest

from labs.client import agents
from labs.client.agent_streams import error_line, headers_setting, measure_agent
from server.apis.table import APIS
from server.launcher import ServerHandle
from server.signals import run_async
from tests.labs.test_agents import MODEL, SCRIPT, streamed

THINK_S = 3.0  # before the first token: longer than the short idle timer below, shorter than the long one
PINGS = {"heartbeat_s": 0.25}


def body(**lab: Any) -> dict[str, Any]:
    return {"model": MODEL, "lab": {"script": SCRIPT, **lab}}


def run_agent(server: ServerHandle, name: str, lab: dict[str, Any], **settings: str):
    url = server.url + APIS[agents.AGENTS[name].api].path
    return run_async(measure_agent(name, url, body(**lab), settings, server.url))


def test_headers_are_each_agents_own_setting() -> None:
    headers = {"X-Request-Id": "a-1", "X-Streamlab-Lab": '{"script": "hi \\"there\\""}'}
    assert headers_setting("codex", headers) == {
        "http_headers": '{"X-Request-Id" = "a-1", "X-Streamlab-Lab" = "{\\"script\\": \\"hi \\\\\\"there\\\\\\"\\"}"}'}
    assert headers_setting("claude-code", headers) == {
        "ANTHROPIC_CUSTOM_HEADERS": 'X-Request-Id: a-1\nX-Streamlab-Lab: {"script": "hi \\"there\\""}'}


def test_the_error_line_is_the_last_failure_not_a_retry_note() -> None:
    stderr = ("warning: no bubblewrap\nERROR: Reconnecting... 1/2\nERROR: stream disconnected: x\n"
              "ERROR: Reconnecting... 2/2\n")
    assert error_line(agents.AgentRun("codex", 1, "", stderr, 1.0)) == "ERROR: stream disconnected: x"
    refused = "API Error: 400 too long"
    assert error_line(agents.AgentRun("claude-code", 1, refused, "", 1.0)) == refused
    assert error_line(agents.AgentRun("codex", 0, "hello", "ERROR: Reconnecting... 1/5", 1.0)) is None


def test_an_agent_on_another_protocols_route_is_refused() -> None:
    with pytest.raises(ValueError, match="speaks responses"):
        run_async(measure_agent("codex", "http://127.0.0.1:9/v1/chat/completions", body()))


@pytest.mark.parametrize("name", list(agents.AGENTS))
def test_the_lab_object_reaches_the_server_as_a_header(agent_server: ServerHandle, name: str) -> None:
    api = agents.AGENTS[name].api
    before = streamed(agent_server, api)
    result = run_agent(agent_server, name, {"stamp": False},
                       **({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256"} if name == "claude-code" else {}))
    assert result.returncode == 0 and result.outcome == "complete", result.stderr_tail
    assert result.text == SCRIPT and result.error is None and result.retries == 0
    assert streamed(agent_server, api) - before == 1
    assert result.record["api"] == api and result.record["outcome"] == "complete"


def test_codex_idle_timer_counts_events_not_ping_comments(agent_server: ServerHandle) -> None:
    """openai/codex#3229's line is Codex's own timer: `: ping` every 0.25 s on the wire does not
    reset it (measured: 12 pings sent, each try left after 1.0 s); above the think it waits."""
    before, pings = streamed(agent_server, "responses"), agent_server.metrics().get("streamlab_heartbeats_total", 0)
    short = run_agent(agent_server, "codex", {"first_token_delay_s": THINK_S, **PINGS},
                      stream_idle_timeout_ms="1000", stream_max_retries="1")
    sent = agent_server.metrics().get("streamlab_heartbeats_total", 0) - pings
    assert short.returncode == 1 and "idle timeout waiting for SSE" in (short.error or ""), short.stderr_tail
    seen = (short.retries, streamed(agent_server, "responses") - before, sent, short.record)
    assert seen[:2] == (1, 2), seen
    assert sent >= 4, seen  # the precondition: pings were on the wire through each try's second
    record = short.record
    assert record["first_token_after_s"] is None and 0.8 <= record["client_gone_after_s"] < THINK_S, seen

    before = streamed(agent_server, "responses")
    long = run_agent(agent_server, "codex", {"first_token_delay_s": THINK_S, **PINGS},
                     stream_idle_timeout_ms="5000", stream_max_retries="1")
    assert long.returncode == 0 and long.text == SCRIPT, long.stderr_tail
    assert streamed(agent_server, "responses") - before == 1
    assert long.record["first_token_after_s"] >= THINK_S


def test_the_agents_context_is_a_synthetic_engine_flag() -> None:
    from server.__main__ import parse_args

    assert parse_args(list(agents.AGENT_SERVER)).context_length == agents.CONTEXT_LENGTH
    assert parse_args(["--engine", "synthetic"]).context_length is None
    for refused in (["--context-length", "16384"], ["--engine", "synthetic", "--context-length", "0"]):
        with pytest.raises(SystemExit):
            parse_args(refused)


def test_claude_code_without_its_fallback_fails_once_through_a_data_only_relay(agent_server: ServerHandle) -> None:
    """claude-code-event-lines' third measurement: the unstreamed retry switched off, the relay's
    stripped stream is one request and an error (through every line: one request, the script)."""
    from proxies.apps.starlette.settings import StarletteSettings
    from proxies.runtime import get_runtime
    from server.processes import free_port

    settings = {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256", "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1"}
    outcomes = {}
    for mode in ("data-only", "lines"):
        relay = StarletteSettings(mode=mode, listen_port=free_port(), upstream_port=agent_server.port)
        with get_runtime("local").run_app(relay) as running:
            before = {stream: agent_server.metrics().get(
                f'streamlab_api_requests_total{{api="messages",stream="{stream}"}}', 0) for stream in ("true", "false")}
            result = run_async(measure_agent("claude-code", running.url + APIS["messages"].path, body(), settings,
                                             agent_server.url))
            after = {stream: agent_server.metrics().get(
                f'streamlab_api_requests_total{{api="messages",stream="{stream}"}}', 0) for stream in ("true", "false")}
        outcomes[mode] = (result, {stream: after[stream] - before[stream] for stream in after})
    stripped, requests = outcomes["data-only"]
    assert stripped.returncode == 1 and "Stream ended without receiving any events" in (stripped.error or "")
    assert requests == {"true": 1, "false": 0}
    relayed, requests = outcomes["lines"]
    assert relayed.returncode == 0 and relayed.text == SCRIPT, relayed.stderr_tail
    assert requests == {"true": 1, "false": 0}
