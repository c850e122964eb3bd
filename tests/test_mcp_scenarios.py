"""The MCP scenarios' guards, generated from labs/catalogue/mcp.py: one test per proxy and variant.

`pytest -k mcp-session-affinity` runs the broken variant through each proxy (fails if the symptom
stops reproducing: 'Session not found' from the replica that does not hold the session) and each
fix on the proxies it names (fails if a session does not complete, or its requests went where the
fix says they must not). Local processes only: the origin has no image yet (docs/mcp.md).
"""
from __future__ import annotations

import pytest

from labs.catalogue.mcp import MCP_SCENARIOS
from labs.scenario.mcp_model import McpScenario
from labs.scenario.mcp_runner import run_mcp

RUNS = [pytest.param(scenario, proxy, variant, id=f"{scenario.name}-{proxy}-{variant}")
        for scenario in MCP_SCENARIOS for proxy, variant in scenario.runs()]


@pytest.mark.parametrize(("scenario", "proxy", "variant"), RUNS)
def test_mcp_guard(scenario: McpScenario, proxy: str, variant: str) -> None:
    run, results = run_mcp(scenario, proxy, variant)
    failed = [result for result in results if not result.passed]
    expectation = "symptom" if variant == "broken" else "cure"
    assert results and not failed, (
        f"{scenario.name} ({variant} through {proxy}): the {expectation} checks failed:\n"
        + "\n".join(f"  - {r.label}: observed {r.observed}" for r in failed)
        + "\nsessions:\n" + "\n".join(f"  {s.session_id}: {s.statuses} {s.error}" for s in run.sessions))
