"""nginx, as verify's pipeline reads and runs it (labs/verify/reader.py): its parser
(config.py), its location search (routes.py), what is in effect (settings.py), its rules
(rules.py) and its rewrite (rewrite.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from labs.verify.model import RouteWanted
from labs.verify.nginx import config, rewrite, routes, settings, targets
from labs.verify.nginx.config import NginxConfig
from labs.verify.nginx.rewrite import HANDLERS, KEPT
from labs.verify.nginx.rules import RULES
from labs.verify.nginx.versions import TABLE
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route


class NginxReader:
    proxy = "nginx"
    example = "nginx.conf"
    shape = re.compile(r"^\s*(http|events|server|upstream|stream)(\s+[^\s{]+)?\s*\{", re.M)  # not Caddy's `http://host {` or `servers {`
    nothing_proxied = "no location has proxy_pass"
    defaults = TABLE
    departure_at_write = None  # proxy_ignore_client_abort decides
    rules = RULES
    handlers = HANDLERS
    kept = KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> NginxConfig:
        return config.parse(path, wanted.main)

    def proxied(self, parsed: NginxConfig) -> list[str]:
        return routes.proxied(parsed)

    def match(self, parsed: NginxConfig, request: Request) -> Route | None:
        return routes.match(parsed, request)

    def settings(self, parsed: NginxConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return settings.in_effect(parsed, chosen.route.handle, wanted)

    def rewrite(self, parsed: NginxConfig, chosen: Chosen, plan: RunPlan) -> Rewritten:
        return rewrite.rewrite(parsed, chosen.route.handle.server, plan)

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return targets.addresses(rewritten)

    def directives(self, parsed: NginxConfig) -> Iterable[str]:
        return parsed.directive_names()


READER = NginxReader()
