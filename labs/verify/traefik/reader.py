"""Traefik's row in verify's table of readers (labs/verify/reader.py names the stages): a static
file and the dynamic configuration its file provider reads (config.py), the router chosen as
Traefik chooses it (routes.py), what is in effect on it (settings.py), its rules (rules.py) and its
rewrite (rewrite.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from labs.verify.rules import AtNextWrite
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route
from labs.verify.rules import Rule
from labs.verify.traefik import config as traefik_config
from labs.verify.traefik import rewrite as traefik_rewrite
from labs.verify.traefik import routes, settings
from labs.verify.traefik.config import TraefikConfig
from labs.verify.traefik.rules import RULES
from labs.verify.versions import DefaultsTable


class TraefikReader:
    proxy: str = "traefik"
    example: str = "traefik.yml"
    # Traefik's own words: its static sections, or a dynamic file's routers with a rule.
    shape: re.Pattern[str] = re.compile(
        r"^\s*(entryPoints|certificatesResolvers)\s*:|^\s*\[entryPoints\]|"
        r"\brule\s*[:=]\s*[\"']?(Host|PathPrefix|Path|HostRegexp|PathRegexp)\(", re.M | re.I)
    nothing_proxied: str = "no router sends to a service"
    defaults: DefaultsTable | None = None  # one set: Traefik 3.7's (settings.py)
    # The fast proxy's late departure is a setting's (experimental.fastProxy: rules.py), not every config's.
    departure_at_write: AtNextWrite | None = None
    rules: Sequence[Rule] = RULES
    handlers: Mapping[str, Callable[..., Any]] = traefik_rewrite.HANDLERS
    kept: frozenset[str] = traefik_rewrite.KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> TraefikConfig:
        return traefik_config.parse(path)

    def proxied(self, config: TraefikConfig) -> list[str]:
        return routes.all_routes(config)

    def match(self, config: TraefikConfig, request: Request) -> Route | None:
        return routes.match(config, request)

    def settings(self, config: TraefikConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return settings.settings(config, chosen, wanted)

    def rewrite(self, config: TraefikConfig, chosen: Chosen, plan: RunPlan) -> Rewritten:
        # Traefik runs as whoever starts it and names no user: nothing differs in a container.
        rewritten = traefik_rewrite.rewrite(config, chosen.route.handle.name, plan)
        rewritten.host_header = chosen.route.host  # the Host the router's rule asks for
        return rewritten

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return [found for _, new, _ in rewritten.files.values()
                for found in traefik_rewrite.addresses(yaml.safe_load(new))]

    def directives(self, config: TraefikConfig) -> Iterable[str]:
        return traefik_rewrite.directives(config)


READER = TraefikReader()
