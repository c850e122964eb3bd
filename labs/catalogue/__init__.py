"""The scenario catalogue: every scenario declared once, in the module of its layer, in one table
(`ALL`) that `labs list`, `labs run`, `make lab-NAME`, `run-all`, `labs setup` and the README read.
What a scenario's workload is decides which runner measures it (labs/scenario/play.py): a token
stream (`Scenario`) or an MCP session (`McpScenario`, labs/catalogue/mcp.py).

`python -m labs render nginx-buffering --variant broken` prints the proxy config a variant runs
(labs/catalogue/render.py).
"""
from __future__ import annotations

from labs.catalogue import apache, apps, caddy, cdn, chain, envoy, haproxy, http2, kubernetes, nginx, reload
from labs.catalogue import mesh, nginx_upstream, relays, traefik, waf
from labs.catalogue import agents, browser, client, libraries, mcp, responses, server
from labs.scenario.mcp_model import McpScenario
from labs.scenario.model import VARIANTS, Scenario

ALL: tuple[Scenario | McpScenario, ...] = (
    *nginx.SCENARIOS, *nginx_upstream.SCENARIOS, *http2.SCENARIOS, *haproxy.SCENARIOS, *envoy.SCENARIOS,
    *cdn.SCENARIOS, *apache.SCENARIOS, *waf.SCENARIOS,
    *caddy.SCENARIOS, *traefik.SCENARIOS, *kubernetes.SCENARIOS, *reload.SCENARIOS, *chain.SCENARIOS, *mesh.SCENARIOS,
    *apps.SCENARIOS, *relays.SCENARIOS, *server.SCENARIOS, *responses.SCENARIOS, *client.SCENARIOS, *libraries.SCENARIOS,
    *browser.SCENARIOS, *agents.SCENARIOS, *mcp.SCENARIOS,
)
# The token streams' scenarios, what reads a chat path, its two variants and its stream checks
# (their guards, the view, verify's and probe's citations); and the MCP sessions' ones.
SCENARIOS: tuple[Scenario, ...] = tuple(s for s in ALL if isinstance(s, Scenario))
MCP_SCENARIOS: tuple[McpScenario, ...] = tuple(s for s in ALL if isinstance(s, McpScenario))
BY_NAME: dict[str, Scenario | McpScenario] = {s.name: s for s in ALL}


class UnknownScenario(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def find(name: str) -> Scenario | McpScenario:
    """Any scenario by name, whatever its workload (`labs run`, `labs setup`)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownScenario(
            f"no scenario named {name!r}; `python -m labs list` shows them all") from None


def get(name: str) -> Scenario:
    """A token stream's scenario by name (what renders a proxy config, plays in the view)."""
    scenario = find(name)
    if not isinstance(scenario, Scenario):
        raise UnknownScenario(f"{name!r} is an MCP scenario: `python -m labs run {name}` plays it (docs/mcp.md)")
    return scenario


def _check_names() -> None:
    """`pytest -k NAME` must select exactly one scenario: names unique, none a prefix of another."""
    names = [s.name for s in ALL]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate scenario names: {sorted(duplicates)}")
    for a in names:
        for b in names:
            if a != b and b.startswith(a):
                raise ValueError(f"scenario name {a!r} is a prefix of {b!r}: -k would select both")


_check_names()
