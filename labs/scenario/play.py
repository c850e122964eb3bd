"""Which runner measures a scenario, decided in one place by what its workload is: a token stream
(`Scenario`, labs/scenario/runner.py: the model server, the path's proxies, the streaming client)
or an MCP session (`McpScenario`, labs/scenario/mcp_runner.py: the MCP origin's replicas, one proxy
at a time, the official SDK's client). `labs run`, `run-all` and their reports call these.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence, Union

from rich.console import Console

from labs.scenario.mcp_model import McpScenario
from labs.scenario.mcp_runner import McpOutcome, run_mcp_scenario
from labs.scenario.model import VARIANTS, Scenario, VariantName
from labs.scenario.runner import Lab, ScenarioOutcome
from labs.lab.hops import hop_kind

AnyScenario = Union[Scenario, McpScenario]
Outcome = Union[ScenarioOutcome, McpOutcome]


def proxy_kinds(scenario: AnyScenario) -> list[str]:
    """The proxy kinds a scenario runs: its path's hops, or the proxies an MCP scenario is measured
    through one at a time."""
    if isinstance(scenario, McpScenario):
        return list(scenario.proxies)
    return [hop_kind(hop) for hop in scenario.path]


def needs_model(scenario: AnyScenario) -> bool:
    """Whether running it starts the model server (an MCP origin serves tools, not tokens)."""
    return not isinstance(scenario, McpScenario)


def cannot_run(scenario: AnyScenario, lab: Lab) -> str | None:
    """Why this lab cannot run the scenario (one line), None when it can: in containers an MCP
    scenario's replicas need the mcp image (`make docker-ready` builds it; docs/mcp.md)."""
    if isinstance(scenario, McpScenario) and lab.runtime.name == "docker":
        from proxies.runtime.docker_mcp import image_problem
        if problem := image_problem():
            return problem
    if isinstance(scenario, McpScenario) and scenario.in_a_browser:
        from labs.scenario.mcp_browser import missing
        if problem := missing():
            return f"{scenario.name} runs the MCP SDK in Chromium: {problem} (or python -m labs setup {scenario.name})"
    return None


def run(lab: Lab, scenario: AnyScenario, variants: Sequence[VariantName] = VARIANTS, *,
        by_release: bool = False) -> Outcome:
    """Every variant, on the lab's choice of releases (Lab.run for a token stream)."""
    if isinstance(scenario, McpScenario):
        return run_mcp_scenario(scenario, variants, lab.proxy_version, lab.progress, lab.runtime.name)
    return lab.run(scenario, variants, by_release=True) if by_release else lab.run(scenario, variants)


def write_report(outcome: Outcome, folder: Path) -> dict[str, Path]:
    from labs.scenario import mcp_report, report
    if isinstance(outcome, McpOutcome):
        return mcp_report.write_report(outcome, folder)
    return report.write_report(outcome, folder)


def report_dict(outcome: Outcome) -> dict[str, Any]:
    from labs.scenario import mcp_report, report
    if isinstance(outcome, McpOutcome):
        return mcp_report.report_dict(outcome)
    return report.report_dict(outcome)


def print_outcome(outcome: Outcome, console: Console) -> None:
    from labs.scenario import mcp_report, report
    if isinstance(outcome, McpOutcome):
        mcp_report.print_outcome(outcome, console)
    else:
        report.print_outcome(outcome, console)
