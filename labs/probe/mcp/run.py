"""One `labs probe --mcp` run: ask the outermost entry what server it is, run the three checks in
order (sessions, progress, then the long GET stream), and name the hop of each fault as the chat
probe does (labs/probe/run.py `attribute`: the innermost entry that still shows it)."""
from __future__ import annotations

from typing import Any, Sequence

from labs.catalogue import MCP_SCENARIOS
from labs.findings import BY_ID, UnusableInput
from labs.probe.base import Budget, Observation, Progress, Settings
from labs.probe.mcp.checks import CHECKS, MCP_CHECK_NAMES
from labs.probe.mcp.endpoint import McpContext, McpPath
from labs.probe.mcp.names import DEFAULT_MCP_MAX_SILENCE_S, DEFAULT_SESSIONS
from labs.probe.mcp.report import McpProbeReport
from labs.probe.run import attribute, observe, references
from server.signals import run_async

AFFINITY = next(s for s in MCP_SCENARIOS if s.name == "mcp-session-affinity")
HELD = next(s for s in MCP_SCENARIOS if s.name == "mcp-held-headers")
# Named faults that no finding kind declares yet: the scenario that shows each, and its fix.
FAULT_REFERENCES: dict[str, tuple[str | None, str]] = {
    "session-affinity": (AFFINITY.name, AFFINITY.fix_summary),
    "held-headers": (HELD.name, f"{HELD.fix_summary}; or a hop that forwards the headers at once (nginx 1.23+)"),
}


def fault_references(kind: str) -> tuple[str | None, str | None]:
    return references(kind) if kind in BY_ID else FAULT_REFERENCES[kind]


def select(names: Sequence[str] | None) -> list[Any]:
    if not names:
        return list(CHECKS)
    unknown = [name for name in names if name not in MCP_CHECK_NAMES]
    if unknown:
        raise UnusableInput(f"no MCP probe check named {unknown[0]!r}; known: {', '.join(MCP_CHECK_NAMES)}")
    return [check for check in CHECKS if check.name in names]


async def probe_mcp_async(path: McpPath, ctx: McpContext, checks: Sequence[str] | None) -> McpProbeReport:
    chosen = select(checks)
    ctx.progress(f"opening {path.urls[0]} with the official MCP client")
    await path.detect()
    report = McpProbeReport(urls=list(path.urls), origin="mcp")
    report.server = (f"MCP ({'stateless' if path.session_id is None else 'sessions'}, "
                     f"{'initialize' if path.mode == 'legacy' else 'server/discover'}); tools: "
                     f"{', '.join(path.tools) or 'none'}; progress tool: {path.tool or 'none'}")
    report.measurements["server"] = {"mode": path.mode, "session_id": path.session_id, "tools": path.tools,
                                     "tool": path.tool}
    observed: list[tuple[Any, Observation]] = [(check, await observe(check, ctx)) for check in chosen]  # type: ignore[arg-type]
    for check, seen in observed:
        if seen.fault:
            seen.hop, asked = await attribute(ctx, check, seen)  # type: ignore[arg-type]
            report.measurements.setdefault("hops", {})[check.name] = {str(h): shown for h, shown in asked.items()}
        report.add(seen, *fault_references(seen.kind))
        if seen.measurements:
            report.measurements[check.name] = seen.measurements
    report.measurements["budget"] = {"budget_s": ctx.budget.seconds,
                                     "used_s": round(ctx.budget.seconds - ctx.budget.left(), 2)}
    return report


def probe_mcp(urls: Sequence[str], *, max_silence_s: float | None = None, budget_s: float = 300.0,
              sessions: int = DEFAULT_SESSIONS, calls: int = 2, tool: str | None = None,
              arguments: str | None = None, api_key_env: str | None = None, insecure: bool = False,
              checks: Sequence[str] | None = None, progress: Progress | None = None) -> McpProbeReport:
    """Probe an MCP path (endpoint URLs, outermost first); UnusableInput when it cannot be used."""
    silence = DEFAULT_MCP_MAX_SILENCE_S if max_silence_s is None else max_silence_s
    for name, value in (("--max-silence", silence), ("--budget", budget_s)):
        if not value > 0:
            raise UnusableInput(f"{name} must be above 0 seconds, got {value:g}")
    if sessions < 1 or calls < 1:
        raise UnusableInput("--mcp-sessions and --mcp-requests must be at least 1")
    path = McpPath.from_args(urls, tool=tool, arguments=arguments, api_key_env=api_key_env, insecure=insecure)
    ctx = McpContext(path, Settings(max_silence_s=silence), Budget(budget_s), progress or (lambda message: None),
                     sessions=sessions, calls=calls)
    return run_async(probe_mcp_async(path, ctx, checks))
