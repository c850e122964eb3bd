"""Claude Code (labs/client/agents.py) through the Starlette relay (proxies/apps/starlette) in
front of the lab's Messages route: what proxy-strips-event-lines teaches with the SDK, measured
with the agent itself. A relay that forwards only `data:` lines makes Claude Code find no
`message_start`, and it asks again without streaming: the server answers the prompt twice."""
from __future__ import annotations

import json

from labs.client import agents
from proxies.apps.starlette.settings import StarletteSettings
from proxies.runtime import get_runtime
from server.launcher import ServerHandle
from server.processes import free_port
from tests.labs.test_agents import MODEL

SCRIPT = "Hello from the lab."
# Its max_tokens must fit the context beside its prompt (tests/labs/test_agents.py); the server is
# tests/labs/conftest.py's `agent_server`.
SETTINGS = {"CLAUDE_CODE_EXTRA_BODY": json.dumps({"lab": {"script": SCRIPT}}), "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256"}


def messages_requests(server: ServerHandle, before: dict[str, float]) -> dict[str, float]:
    """Streamed and unstreamed Messages requests the server counted since `before`."""
    after = server.metrics()
    return {stream: after.get(key, 0.0) - before.get(key, 0.0) for stream in ("true", "false")
            for key in [f'streamlab_api_requests_total{{api="messages",stream="{stream}"}}']}


def claude_through(server: ServerHandle, mode: str) -> tuple[agents.AgentRun, dict[str, float]]:
    settings = StarletteSettings(mode=mode, listen_port=free_port(), upstream_port=server.port)
    with get_runtime("local").run_app(settings) as running:
        before = server.metrics()
        run = agents.run("claude-code", running.url, "Say hello", MODEL, settings=SETTINGS)
        return run, messages_requests(server, before)


def test_claude_code_streams_once_through_a_relay_that_forwards_every_line(agent_server: ServerHandle) -> None:
    run, requests = claude_through(agent_server, "lines")
    assert run.returncode == 0 and run.answer == SCRIPT, run.stderr[-500:]
    assert requests == {"true": 1.0, "false": 0.0}


def test_claude_code_asks_again_unstreamed_through_a_data_only_relay(agent_server: ServerHandle) -> None:
    run, requests = claude_through(agent_server, "data-only")
    # The answer arrives, from the second, unstreamed request: the cost is the doubled request.
    assert run.returncode == 0 and run.answer == SCRIPT, run.stderr[-500:]
    assert requests == {"true": 1.0, "false": 1.0}
