"""Envoy's row in verify's table of readers (labs/verify/reader.py names the stages): a static
bootstrap, its route chosen as Envoy chooses it (routes.py), what is in effect on it (settings.py),
its rules (rules.py) and its rewrite (rewrite.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from labs.verify.envoy import config as envoy_config
from labs.verify.envoy import rewrite as envoy_rewrite
from labs.verify.envoy import routes, settings, versions
from labs.verify.envoy.config import EnvoyConfig
from labs.verify.envoy.rules import RULES
from labs.verify.rules import AtNextWrite
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route
from labs.verify.rules import Rule
from labs.verify.versions import DefaultsTable


class EnvoyReader:
    proxy: str = "envoy"
    example: str = "envoy.yaml"
    shape: re.Pattern[str] = re.compile(r"^\s*(static_resources|admin|dynamic_resources|node)\s*:", re.M)
    nothing_proxied: str = ("no route of a listener's HTTP connection manager sends to a cluster "
                            "(static_resources: listeners, a virtual host, a route with a cluster)")
    defaults: DefaultsTable | None = versions.TABLE
    departure_at_write: AtNextWrite | None = None  # Envoy passes a departure on at once (measured on 1.40)
    rules: Sequence[Rule] = RULES
    handlers: Mapping[str, Callable[..., Any]] = envoy_rewrite.HANDLERS
    kept: frozenset[str] = envoy_rewrite.KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> EnvoyConfig:
        return envoy_config.parse(path)

    def proxied(self, config: EnvoyConfig) -> list[str]:
        return routes.proxied(config)

    def match(self, config: EnvoyConfig, request: Request) -> Route | None:
        return routes.match(config, request)

    def settings(self, config: EnvoyConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return settings.settings(config, chosen, wanted)

    def rewrite(self, config: EnvoyConfig, chosen: Chosen, plan: RunPlan) -> Rewritten:
        # Envoy runs as whoever starts it and names no user: nothing differs in a container.
        rewritten = envoy_rewrite.rewrite(config, chosen.route.handle, plan)
        rewritten.host_header = chosen.route.host  # the domain the chosen virtual host matches
        return rewritten

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return [found for _, new, _ in rewritten.files.values() for found in envoy_rewrite.addresses(new)]

    def directives(self, config: EnvoyConfig) -> Iterable[str]:
        return envoy_rewrite.directives(config)


READER = EnvoyReader()
