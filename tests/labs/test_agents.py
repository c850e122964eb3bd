"""The coding agents as clients of the lab's server (labs/client/agents.py), offline: Codex CLI on
`/v1/responses`, Claude Code on `/v1/messages`, each counted and recorded by the server.

Their prompts do not fit the tiny model's 2,048 positions (Claude Code 2.1.332 sends 9,937 tokens
of system prompt and tools, Codex 0.171.0 about 11,100): the synthetic engine reads only a
tokenizer and a context length, so it serves them the tiny tokenizer with a 16,384-token context
(`--context-length`, agents.AGENT_SERVER).
"""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from labs.client import agents
from server.launcher import ServerHandle

MODEL = "tiny"
CONTEXT = agents.CONTEXT_LENGTH
SCRIPT = "Hello from the lab: 鬱蒼とした森で🦩が踊る."


def streamed(server: ServerHandle, api: str) -> float:
    return server.metrics().get(f'streamlab_api_requests_total{{api="{api}",stream="true"}}', 0.0)


def record(server: ServerHandle, request_id: str) -> dict:
    return httpx.get(f"{server.url}/lab/requests/{request_id}", timeout=10).json()


def test_each_agent_speaks_a_protocol_of_the_servers_table() -> None:
    from server.apis.table import APIS

    assert {agent.api for agent in agents.AGENTS.values()} <= set(APIS)


def test_claude_code_answers_the_script_in_one_streamed_request(agent_server: ServerHandle) -> None:
    # CLAUDE_CODE_EXTRA_BODY is merged into its request body: the `lab` object reaches the server.
    # Its max_tokens (32,000 for a model it does not know) would not fit the context beside the
    # prompt (a 400): CLAUDE_CODE_MAX_OUTPUT_TOKENS lowers it.
    before = streamed(agent_server, "messages")
    run = agents.run("claude-code", agent_server.url, "Say hello", MODEL, settings={
        "CLAUDE_CODE_EXTRA_BODY": json.dumps({"lab": {"script": SCRIPT}}),
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256",
        "ANTHROPIC_CUSTOM_HEADERS": "X-Request-Id: claude-code-script"})
    assert run.returncode == 0 and run.answer == SCRIPT, run.stderr[-500:]
    assert streamed(agent_server, "messages") - before == 1
    seen = record(agent_server, "claude-code-script")
    assert seen["api"] == "messages" and seen["stream"] and seen["outcome"] == "complete"


def test_claude_code_sends_a_request_again_after_a_max_tokens_stop(agent_server: ServerHandle) -> None:
    # Unscripted, the synthetic engine runs to max_tokens: Claude Code asks to go on 3 times
    # (4 streamed requests, measured), then gives up with its own message and exit 1.
    before = streamed(agent_server, "messages")
    run = agents.run("claude-code", agent_server.url, "Say hello", MODEL,
                     settings={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "12"})
    assert run.returncode == 1 and "exceeded the 12 output token maximum" in run.answer, run.answer
    assert streamed(agent_server, "messages") - before == 4


def test_codex_streams_the_responses_route_to_its_end(agent_server: ServerHandle) -> None:
    # Codex has no switch that adds body fields, so the answer is the synthetic engine's own: the
    # corpus from its start, until the context is full; the server ends it `response.incomplete`
    # (max_output_tokens), which Codex reports as an error, with the text in its transcript.
    opening = httpx.post(f"{agent_server.url}/v1/chat/completions", timeout=10, json={
        "model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}).json()
    before = streamed(agent_server, "responses")
    run = agents.run("codex", agent_server.url, "Say hello", MODEL, settings={
        "http_headers": '{"X-Request-Id" = "codex-stream"}', "stream_max_retries": "0"})
    assert run.returncode == 1 and "Incomplete response returned, reason: max_output_tokens" in run.stderr
    assert opening["choices"][0]["message"]["content"] in run.stderr
    assert streamed(agent_server, "responses") - before == 1
    seen = record(agent_server, "codex-stream")
    assert seen["api"] == "responses" and seen["stream"] and seen["outcome"] == "complete"
    assert 1_000 < seen["tokens_generated"] < CONTEXT, seen


def test_a_missing_agent_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(agents, "AGENTS_BIN", tmp_path)
    with pytest.raises(agents.AgentMissing, match="python -m proxies.apps.install agents"):
        agents.run("codex", "http://127.0.0.1:9", "Say hello", MODEL)
