"""The MCP path under test: its endpoint URLs (outermost first), the headers every request carries,
what the server behind them is (a session or stateless, its tools) and the tool the probe calls.

What the server is comes from the server itself, through the outermost entry, with the official
client (labs/client/mcp_session.py): a 2025 `initialize` (the handshake every 1.x client sends;
the server's answer says whether it keeps sessions), else the 2026-07-28 `server/discover`, then
`tools/list`. An entry that opens neither is not an MCP endpoint: UnusableInput (exit 2).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from labs.client.mcp_session import Mode, McpResult, measure_session
from labs.findings import UnusableInput
from labs.probe.base import Budget, Settings
from labs.probe.path import entries, key_from

# The lab's own origin's tool that reports progress (server/mcp/app.py SLOW_TOOL): the default
# when the server lists it.
ORIGIN_PROGRESS_TOOL = "slow_task"
DISCOVER_TIMEOUT_S = 10.0


def check_mcp_url(url: str) -> str:
    """An MCP endpoint URL (http://host:port/mcp); UnusableInput says what is wrong with it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnusableInput(f"{url!r} is not an http:// or https:// URL of an MCP endpoint "
                            f"(e.g. http://127.0.0.1:8080/mcp)")
    try:
        parts.port
    except ValueError:
        raise UnusableInput(f"{url!r} has an invalid port") from None
    return url


@dataclass
class McpPath:
    urls: list[str]
    headers: dict[str, str] = field(default_factory=dict)
    tool: str | None = None  # --mcp-tool, else the origin's progress tool when listed
    arguments: dict[str, Any] = field(default_factory=dict)
    verify_tls: bool = True
    mode: Mode = "legacy"  # how the server opened: the 2025 handshake, or 2026-07-28 discover
    session_id: str | None = None  # the id the outermost entry's initialize gave (None: stateless)
    tools: list[str] = field(default_factory=list)

    @classmethod
    def from_args(cls, urls: Sequence[str], *, tool: str | None = None, arguments: str | None = None,
                  api_key_env: str | None = None, insecure: bool = False,
                  environ: Mapping[str, str] | None = None) -> "McpPath":
        env = os.environ if environ is None else environ
        checked = entries(urls, check_mcp_url, "MCP endpoint URL")
        key = key_from(api_key_env, env)
        headers = {"authorization": f"Bearer {key}"} if key else {}
        try:
            parsed = json.loads(arguments) if arguments else {}
        except ValueError as exc:
            raise UnusableInput(f"--mcp-args is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise UnusableInput("--mcp-args must be a JSON object (the tool's arguments by name)")
        return cls(urls=checked, headers=headers, tool=tool, arguments=parsed, verify_tls=not insecure)

    async def session(self, hop: int, *, calls: int = 1, tool: str | None = None,
                      arguments: dict[str, Any] | None = None, timeout_s: float = 30.0) -> McpResult:
        """One session of the official client through entry `hop` (tool None: tools/list)."""
        return await measure_session(self.urls[hop], mode=self.mode, calls=calls, tool=tool,
                                     arguments=arguments, timeout_s=timeout_s, headers=self.headers or None,
                                     verify_tls=self.verify_tls)

    async def detect(self) -> None:
        """Open the outermost entry as the official client does; learn the tools and whether the
        server keeps sessions. UnusableInput when it is not an MCP endpoint."""
        opened = await self.session(0, timeout_s=DISCOVER_TIMEOUT_S)
        if not opened.opened:
            self.mode = "modern"
            modern = await self.session(0, timeout_s=DISCOVER_TIMEOUT_S)
            if not modern.opened:
                self.mode = "legacy"
                raise UnusableInput(f"{self.urls[0]} is not an MCP endpoint the official client can open "
                                    f"(statuses {opened.statuses}): {opened.error}")
            opened = modern
        self.session_id = opened.session_id
        self.tools = _listed(opened)
        # A path that loses sessions loses the listing too: the tools are the server's, so the
        # inner entries are asked, outermost first, until one lists them.
        for hop in range(1, len(self.urls)):
            if self.tools:
                break
            self.tools = _listed(await self.session(hop, timeout_s=DISCOVER_TIMEOUT_S))
        if self.tool is None and ORIGIN_PROGRESS_TOOL in self.tools:
            self.tool = ORIGIN_PROGRESS_TOOL
        elif self.tool is not None and self.tools and self.tool not in self.tools:
            raise UnusableInput(f"--mcp-tool {self.tool}: {self.urls[0]} lists {', '.join(self.tools)}")


def _listed(session: McpResult) -> list[str]:
    """The tool names a session's tools/list answered (none when it failed)."""
    listed = session.calls[0].result if session.calls else None
    return listed.split() if listed else []


@dataclass
class McpContext:
    """One MCP probe run: what labs.probe.run.attribute reads (path.urls, budget, progress)."""

    path: McpPath
    settings: Settings
    budget: Budget
    progress: Callable[[str], None] = lambda message: None
    sessions: int = 4
    calls: int = 2
