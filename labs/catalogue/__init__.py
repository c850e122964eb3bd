"""The scenario catalogue: every scenario declared once, in the module of its layer.

`python -m labs render nginx-buffering --variant broken` prints the proxy config a variant runs
(labs/catalogue/render.py).
"""
from __future__ import annotations

from labs.catalogue import apache, apps, caddy, cdn, chain, envoy, haproxy, http2, kubernetes, nginx, reload
from labs.catalogue import mesh, nginx_upstream, relays, traefik
from labs.catalogue import browser, client, libraries, server
from labs.scenario.model import VARIANTS, Scenario

SCENARIOS: tuple[Scenario, ...] = (
    *nginx.SCENARIOS, *nginx_upstream.SCENARIOS, *http2.SCENARIOS, *haproxy.SCENARIOS, *envoy.SCENARIOS,
    *cdn.SCENARIOS, *apache.SCENARIOS,
    *caddy.SCENARIOS, *traefik.SCENARIOS, *kubernetes.SCENARIOS, *reload.SCENARIOS, *chain.SCENARIOS, *mesh.SCENARIOS,
    *apps.SCENARIOS, *relays.SCENARIOS, *server.SCENARIOS, *client.SCENARIOS, *libraries.SCENARIOS, *browser.SCENARIOS,
)
BY_NAME: dict[str, Scenario] = {s.name: s for s in SCENARIOS}


class UnknownScenario(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str) -> Scenario:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownScenario(
            f"no scenario named {name!r}; `python -m labs list` shows them all") from None


def _check_names() -> None:
    """`pytest -k NAME` must select exactly one scenario: names unique, none a prefix of another."""
    names = [s.name for s in SCENARIOS]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate scenario names: {sorted(duplicates)}")
    for a in names:
        for b in names:
            if a != b and b.startswith(a):
                raise ValueError(f"scenario name {a!r} is a prefix of {b!r}: -k would select both")


_check_names()
