"""The MCP scenarios' guards, generated from the catalogue's one table (`labs.catalogue.ALL`, whose
MCP sessions' scenarios are `catalogue.MCP_SCENARIOS`): one test per proxy, variant and release.

`pytest -k mcp-session-affinity` runs the broken variant through each proxy (fails if the symptom
stops reproducing: 'Session not found' from the replica that does not hold the session, two
replicas having answered) and each fix on the proxies it names (fails if a session does not
complete, or its requests went where the fix says they must not), on each proxy's current release;
and again on the oldest release (Debian 12's, `...-oldest`) the broken variant and the fixes that
are the proxy's own settings, locally (the token streams' guards prove the oldest release in
containers; an MCP scenario's oldest is proven here). In containers (marked `docker`, make test's
docker pass: the proxy and each replica in its container, the mcp image) each scenario's broken
variant through its first proxy and one fix there, on the current release: what the containers add
is the runtime, not a release, so two runs per scenario prove it (`...-docker`).
"""
from __future__ import annotations

import pytest

from labs import catalogue
from labs.scenario.mcp_model import McpScenario
from labs.scenario.mcp_runner import proxy_release, run_mcp
from tests.runtimes import require_images


def _proxy_setting(scenario: McpScenario, variant: str) -> bool:
    """Whether the variant is the proxy's behaviour (the broken balancing, or a setting of its own):
    what a proxy's release could change; every variant where a release did (`since`: a server-side
    fix is proven where the proxy still holds what it fixes)."""
    if variant == "broken":
        return True
    fix = scenario.fix(variant).variant
    if fix.client_sdk is not None:  # another client, on a setting its Python rows prove on both releases
        return False
    return any(value is not None for own in fix.proxy.values() for value in own.values()) or bool(scenario.since)


RUNS = [pytest.param(scenario, proxy, variant, releases, id=f"{scenario.name}-{proxy}-{variant}{suffix}")
        for releases, suffix in (("current", ""), ("oldest", "-oldest"))
        for scenario in catalogue.MCP_SCENARIOS for proxy, variant in scenario.runs()
        if releases == "current" or _proxy_setting(scenario, variant)]


def _in_containers(scenario: McpScenario) -> list[tuple[str, str]]:
    """The broken variant through the scenario's first proxy, and one fix: the first through that
    proxy that is the proxy's own setting, else the first through it, else the first at all."""
    proxy = scenario.proxies[0]
    fixes = [(on, variant) for on, variant in scenario.runs() if variant != "broken"]
    fixes.sort(key=lambda run: (run[0] != proxy, not _proxy_setting(scenario, run[1])))  # stable
    return [(proxy, "broken"), *fixes[:1]]


DOCKER_RUNS = [pytest.param(scenario, proxy, variant, id=f"{scenario.name}-{proxy}-{variant}-docker")
               for scenario in catalogue.MCP_SCENARIOS for proxy, variant in _in_containers(scenario)]


@pytest.mark.parametrize(("scenario", "proxy", "variant", "releases"), RUNS)
def test_mcp_guard(scenario: McpScenario, proxy: str, variant: str, releases: str) -> None:
    guard(scenario, proxy, variant, releases, "local")


@pytest.mark.docker
class TestInContainers:
    """One scope for xdist (--dist loadscope): one worker runs them in turn while the others run the
    rest of the docker pass (an MCP run's timings want no second run beside it on two cores)."""

    @pytest.mark.parametrize(("scenario", "proxy", "variant"), DOCKER_RUNS)
    def test_mcp_guard(self, scenario: McpScenario, proxy: str, variant: str) -> None:
        require_images(["mcp", proxy], {proxy: proxy_release(proxy, "current")})
        guard(scenario, proxy, variant, "current", "docker")


def guard(scenario: McpScenario, proxy: str, variant: str, releases: str, runtime: str) -> None:
    run, results = run_mcp(scenario, proxy, variant, choice=releases, runtime=runtime)
    failed = [result for result in results if not result.passed]
    if variant == "broken" and scenario.symptom_ended({proxy: run.release}):
        # The release fixed it (Since.ends_symptom): the broken variant must no longer show the symptom.
        assert failed, (f"{scenario.name} (broken through {proxy} {run.release}): the symptom reproduced on a "
                        f"release that fixed it:\n" + "\n".join(f"  - {r.label}: {r.observed}" for r in results))
        return
    expectation = "symptom" if variant == "broken" else "cure"
    assert results and not failed, (
        f"{scenario.name} ({variant} through {proxy} {run.release}, {runtime}): the {expectation} checks failed:\n"
        + "\n".join(f"  - {r.label}: observed {r.observed}" for r in failed)
        + "\nsessions:\n" + "\n".join(f"  {s.session_id}: {s.statuses} {s.error}" for s in run.sessions))


def test_the_guards_cover_every_mcp_run_of_the_table_on_both_releases() -> None:
    """Every MCP entry of the one table is guarded, each run on the current release, and the broken
    variant also on the oldest (so the table cannot grow an unguarded MCP scenario); in containers
    its broken variant and one fix, no more (the docker pass's time is counted)."""
    ids = {param.id for param in RUNS}
    assert catalogue.MCP_SCENARIOS and all(s in catalogue.ALL for s in catalogue.MCP_SCENARIOS)
    for scenario in catalogue.MCP_SCENARIOS:
        for proxy, variant in scenario.runs():
            assert f"{scenario.name}-{proxy}-{variant}" in ids
        for proxy in scenario.proxies:
            assert f"{scenario.name}-{proxy}-broken-oldest" in ids
        in_containers = [param.id for param in DOCKER_RUNS if param.values[0] is scenario]
        assert len(in_containers) == 2 and in_containers[0] == f"{scenario.name}-{scenario.proxies[0]}-broken-docker"
