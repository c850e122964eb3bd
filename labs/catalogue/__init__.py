"""The scenario catalogue: every scenario declared once, in the module of its layer.

Importing it also registers each scenario's proxy settings as named variants of `proxies`
(`<scenario>:broken`, `<scenario>:fixed`), so `python -m proxies render nginx --variant
nginx-buffering:broken` prints exactly what the lab runs.
"""
from __future__ import annotations

from labs.catalogue import chain, envoy, haproxy, nginx
from labs.catalogue import client, server
from labs.scenario import VARIANTS, Scenario

SCENARIOS: tuple[Scenario, ...] = (
    *nginx.SCENARIOS, *haproxy.SCENARIOS, *envoy.SCENARIOS, *chain.SCENARIOS,
    *server.SCENARIOS, *client.SCENARIOS,
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


def _register_proxy_variants() -> None:
    from labs.runner import hop_settings
    from proxies.variants import register_variant

    for scenario in SCENARIOS:
        for variant_name in VARIANTS:
            variant = scenario.variant(variant_name)
            for proxy in scenario.path:
                def factory(proxy=proxy, overrides=variant.proxy.get(proxy, {}), base=scenario.base):
                    return hop_settings(proxy, overrides, base)
                register_variant(proxy, f"{scenario.name}:{variant_name}", factory, replace=True)  # type: ignore[arg-type]


_check_names()
_register_proxy_variants()
