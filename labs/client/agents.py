"""The coding agents as measured clients, one row per agent: OpenAI's Codex CLI (`codex exec`,
the Responses API) and Anthropic's Claude Code (`claude -p`, the Messages API), each pointed at a
server's URL as its model provider, in a home and a working folder of its own.

    run = agents.run("claude-code", server.url, "Say hello", model="tiny")
    run.answer, run.returncode, run.elapsed_s, run.stderr

Both run offline here (measured against a loopback listener, Codex CLI 0.171.0 and Claude Code
2.1.332, no network but the npm registry): one POST each (`/v1/responses` with
`Authorization: Bearer`, `/v1/messages?beta=true` with `x-api-key` and `anthropic-version`), a
streamed request, the answer on stdout, exit 0, in 0.9 s and 1.1 s. Their other traffic (Codex's
analytics, Claude Code's telemetry and update checks) is switched off where a switch exists, and
fails quietly where it does not.

`settings` are what a user would set: for Codex, keys of its model provider (`-c
model_providers.lab.KEY=VALUE`: `stream_idle_timeout_ms`, `stream_max_retries`,
`request_max_retries`, `http_headers`); for Claude Code, environment variables
(`CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK`, `CLAUDE_CODE_MAX_OUTPUT_TOKENS`,
`ANTHROPIC_CUSTOM_HEADERS`).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from proxies.apps.nodejs import AGENTS_BIN
from server.apis.table import APIS

# The key the agents send; the lab's server takes any (a lab token is a separate header).
API_KEY = "sk-streamlab"
TIMEOUT_S = 120.0
# Their first prompts (~11,100 tokens for Codex 0.171.0, 9,937 for Claude Code 2.1.332 in the tiny
# tokenizer) do not fit the tiny model's 2,048 positions: the synthetic engine serves them this.
CONTEXT_LENGTH = 16_384
AGENT_SERVER = ("--engine", "synthetic", "--context-length", str(CONTEXT_LENGTH))


@dataclass(frozen=True)
class Agent:
    name: str
    api: str  # its protocol in server.apis.table.APIS
    package: str  # npm, pinned in proxies/apps/agents/package.json
    binary: str  # in proxies/apps/agents/node_modules/.bin
    # (server URL, model, prompt, settings) -> the arguments after the binary
    arguments: Callable[[str, str, str, Mapping[str, str]], list[str]]
    # (server URL, model, home, settings) -> its environment, on top of PATH and LANG
    environment: Callable[[str, str, Path, Mapping[str, str]], dict[str, str]]


def _codex_arguments(url: str, model: str, prompt: str, settings: Mapping[str, str]) -> list[str]:
    # A provider of its own (https://developers.openai.com/codex/config-reference, model_providers):
    # `wire_api = "responses"` is the only one Codex 0.17x accepts.
    base_url = url.rstrip("/") + APIS["responses"].path.removesuffix("/responses")
    provider = {"name": "streamlab", "base_url": base_url, "wire_api": "responses",
                "env_key": "STREAMLAB_API_KEY"}
    # Values are TOML: the strings quoted (as JSON writes them), the settings as the user wrote them.
    config = [f"model_providers.lab.{key}={json.dumps(value)}" for key, value in provider.items()]
    config += [f"model_providers.lab.{key}={value}" for key, value in settings.items()]
    config += ["model_provider=\"lab\"", f"model={json.dumps(model)}"]
    return ["exec", "--skip-git-repo-check", "--color", "never",
            *(part for pair in config for part in ("-c", pair)), prompt]


def _codex_environment(url: str, model: str, home: Path, settings: Mapping[str, str]) -> dict[str, str]:
    return {"CODEX_HOME": str(home), "STREAMLAB_API_KEY": API_KEY}


def _claude_arguments(url: str, model: str, prompt: str, settings: Mapping[str, str]) -> list[str]:
    return ["-p", prompt, "--model", model]


def _claude_environment(url: str, model: str, home: Path, settings: Mapping[str, str]) -> dict[str, str]:
    # https://docs.anthropic.com/en/docs/claude-code/settings#environment-variables
    return {"ANTHROPIC_BASE_URL": url.rstrip("/"), "ANTHROPIC_API_KEY": API_KEY,
            # Its background requests name the small model: the server serves one model.
            "ANTHROPIC_SMALL_FAST_MODEL": model, "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", **settings}


AGENTS: dict[str, Agent] = {agent.name: agent for agent in (
    Agent("codex", "responses", "@openai/codex", "codex", _codex_arguments, _codex_environment),
    Agent("claude-code", "messages", "@anthropic-ai/claude-code", "claude", _claude_arguments,
          _claude_environment),
)}


class AgentMissing(RuntimeError):
    """The agent is not installed; the message says how to install it."""


@dataclass
class AgentRun:
    agent: str
    returncode: int | None  # None: killed at the timeout
    answer: str  # what it printed on stdout, stripped: the model's last message
    stderr: str
    elapsed_s: float


def binary(name: str) -> Path:
    path = AGENTS_BIN / AGENTS[name].binary
    if not path.exists():
        raise AgentMissing(f"{AGENTS[name].package} is not installed: python -m proxies.apps.install agents")
    return path


def run(name: str, server_url: str, prompt: str, model: str, settings: Mapping[str, str] | None = None,
        timeout_s: float = TIMEOUT_S) -> AgentRun:
    """One prompt through the agent `name` against `server_url`, in a fresh home and working
    folder (no user's config is read, nothing is left behind)."""
    agent, settings = AGENTS[name], dict(settings or {})
    program = binary(name)
    with tempfile.TemporaryDirectory(prefix=f"streamlab-{name}-") as folder:
        home, work = Path(folder) / "home", Path(folder) / "work"
        home.mkdir()
        work.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(home),
               **agent.environment(server_url, model, home, settings)}
        argv = [str(program), *agent.arguments(server_url, model, prompt, settings)]
        started = time.perf_counter()
        # A session of its own: the agent's helpers (Codex's sandbox) end with it.
        process = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            returncode: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            returncode = None
        return AgentRun(name, returncode, stdout.strip(), stderr, time.perf_counter() - started)
