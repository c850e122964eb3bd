"""HAProxy, as verify's pipeline reads and runs it (labs/verify/reader.py: the stages it fills)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from labs.verify.haproxy import config, read, rewrite, routes, versions
from labs.verify.haproxy.config import HaproxyConfig
from labs.verify.haproxy.rules import RULES
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route


class HaproxyReader:
    proxy = "haproxy"
    example = "haproxy.cfg"
    shape = re.compile(r"^(global|defaults|frontend|backend|listen)(\s+\S+)*\s*$", re.M)
    nothing_proxied = "no frontend or listen section has a use_backend, a default_backend or servers of its own"
    defaults = versions.TABLE
    departure_at_write = None  # `option abortonclose` decides (labs/verify/haproxy/read.py)
    rules = RULES
    handlers = rewrite.HANDLERS
    kept = rewrite.KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> HaproxyConfig:
        return config.parse(path)

    def proxied(self, config: HaproxyConfig) -> list[str]:
        return routes.proxied(config)

    def match(self, config: HaproxyConfig, request: Request) -> Route | None:
        return routes.match(config, request)

    def settings(self, config: HaproxyConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return read.in_effect(config, chosen.route.handle, wanted)

    def rewrite(self, config: HaproxyConfig, chosen: Chosen, plan: RunPlan) -> Rewritten:
        return rewrite.rewrite(config, chosen.route.handle, plan)

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return rewrite.addresses(rewritten)

    def directives(self, config: HaproxyConfig) -> Iterable[str]:
        return rewrite.directives(config)


READER = HaproxyReader()
