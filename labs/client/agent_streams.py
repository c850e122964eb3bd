"""A coding agent as a scenario's client: one `codex exec` or `claude -p` run through the
scenario's entry URL, reported as the measuring client's StreamResult plus what only the agent
can say (its exit status, its error line, its own retries) and the server's record of its last
request.

    result = await measure_agent("codex", entry_url + "/v1/responses", body,
                                 settings={"stream_idle_timeout_ms": "5000"}, server_url=server.url)
    result.returncode, result.error, result.retries, result.record

The agents take no body fields from us, so the workload's `lab` object and an `X-Request-Id`
travel as headers (`X-Streamlab-Lab`, server/apis/lab.py): Codex's provider `http_headers`,
Claude Code's `ANTHROPIC_CUSTOM_HEADERS`. An agent sees only its answer, never the events: the
result has no events, TTFT or gaps, only the run's wall time as `e2e_s`; how many requests the
server served is the server's count (the variant's `streamlab_api_requests_total`).
"""
from __future__ import annotations

import asyncio
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Mapping

import httpx

from labs.client import agents
from labs.client.results import StreamResult
from server.apis.lab import LAB_HEADER
from server.apis.table import APIS

# What the scenario's prompt is to the agent; the answer is the workload's `lab.script`.
PROMPT = "Say hello"
# Codex prints one line per retry of a stream: `ERROR: Reconnecting... 2/5` (0.171.0, measured).
RETRY_LINE = re.compile(r"Reconnecting\.\.\. \d+/\d+")


@dataclass
class AgentResult(StreamResult):
    """A StreamResult with what an agent run fills: `mode` agent:<name>; `outcome` complete (exit
    0), timeout (killed at the deadline) or error-in-band (it reported a failure); `error` its
    last error line; `text` its answer; `e2e_s` the run's wall time. And its own fields:"""

    returncode: int | None = None
    retries: int = 0  # the retry lines it printed
    record: dict[str, Any] | None = None  # the server's record of its last request (GET /lab/requests/ID)
    stderr_tail: str = ""


def headers_setting(name: str, headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` as the agent's own setting: Codex's provider `http_headers` (a TOML inline
    table), Claude Code's `ANTHROPIC_CUSTOM_HEADERS` (`Name: value` lines)."""
    if name == "codex":
        pairs = ", ".join(f"{json.dumps(key)} = {json.dumps(value)}" for key, value in headers.items())
        return {"http_headers": "{" + pairs + "}"}
    return {"ANTHROPIC_CUSTOM_HEADERS": "\n".join(f"{key}: {value}" for key, value in headers.items())}


def error_line(run: agents.AgentRun) -> str | None:
    """The last line the agent printed about a failure (Codex: `ERROR: ...` on stderr; Claude
    Code: `API Error: ...` as its answer), its retry notes left out; None after exit 0."""
    if run.returncode == 0:
        return None
    lines = [line.strip() for line in (run.stderr + "\n" + run.answer).splitlines()]
    failures = [line for line in lines if "error" in line.lower() and not RETRY_LINE.search(line)
                and not line.lower().startswith("warning")]
    return (failures or [line for line in lines if line] or ["(nothing printed)"])[-1]


def record(server_url: str | None, request_id: str) -> dict[str, Any] | None:
    if server_url is None:
        return None
    try:
        reply = httpx.get(f"{server_url}/lab/requests/{request_id}", timeout=5)
    except httpx.HTTPError:
        return None
    return reply.json() if reply.status_code == 200 else None


async def measure_agent(name: str, url: str, body: Mapping[str, Any], settings: Mapping[str, str] | None = None,
                        server_url: str | None = None, timeout_s: float = agents.TIMEOUT_S) -> AgentResult:
    """One run of the agent `name` against the route `url` (its protocol's path on the scenario's
    entry), with the body's model and `lab` object; `settings` as agents.run takes them."""
    agent = agents.AGENTS[name]
    path = APIS[agent.api].path
    if not url.endswith(path):
        raise ValueError(f"the agent {name!r} speaks {agent.api} ({path}), not {url}: set the workload's api")
    request_id = f"agent-{name}-{secrets.token_hex(4)}"
    headers = {"X-Request-Id": request_id}
    if body.get("lab"):
        headers[LAB_HEADER] = json.dumps(body["lab"])
    run = await asyncio.to_thread(agents.run, name, url.removesuffix(path), PROMPT, str(body["model"]),
                                  {**(settings or {}), **headers_setting(name, headers)}, timeout_s)
    outcome = "complete" if run.returncode == 0 else "timeout" if run.returncode is None else "error-in-band"
    return AgentResult(url=url, mode=f"agent:{name}", outcome=outcome, error=error_line(run),
                       e2e_s=run.elapsed_s, text=run.answer, returncode=run.returncode,
                       retries=len(RETRY_LINE.findall(run.stderr)),
                       record=await asyncio.to_thread(record, server_url, request_id),
                       stderr_tail=run.stderr[-2000:])
