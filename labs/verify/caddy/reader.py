"""Caddy (a Caddyfile through Caddy's own adapter, or Caddy's JSON), as verify reads and runs it:
the stages of labs/verify/reader.py."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from labs.verify.caddy import config, read, rewrite, routes, rules
from labs.verify.caddy.config import CaddyConfig
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route


class CaddyReader:
    proxy = "caddy"
    example = "Caddyfile"
    # A Caddyfile directive opening a line (nginx and HAProxy have none of these words), or
    # Caddy's JSON (its apps.http block).
    shape = re.compile(r"^\s*(reverse_proxy|encode|handle_path|php_fastcgi|file_server|respond|"
                       r"tls\s+(internal|\S+@\S+))\b|\"handler\"\s*:\s*\"(reverse_proxy|subroute)\"", re.M)
    nothing_proxied = "no server has a reverse_proxy"
    defaults = None  # one set: the releases' differences are the rules' (rules.py)
    departure_at_write = None  # flush_interval decides (rules.py)
    rules = rules.RULES
    handlers = rewrite.HANDLERS
    kept = rewrite.KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> CaddyConfig:
        return config.parse(path, wanted.series)

    def proxied(self, parsed: CaddyConfig) -> list[str]:
        return routes.proxied(parsed)

    def match(self, parsed: CaddyConfig, request: Request) -> Route | None:
        return routes.match(parsed, request)

    def settings(self, parsed: CaddyConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return read.settings(parsed, chosen.route.handle)

    def rewrite(self, parsed: CaddyConfig, chosen: Chosen, plan: RunPlan) -> Rewritten:
        return rewrite.rewrite(parsed, chosen.route.handle.server, plan)

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return rewrite.addresses(rewritten)

    def directives(self, parsed: CaddyConfig) -> Iterable[str]:
        return {name for _, _, name in rewrite.entries(parsed.json)}


READER = CaddyReader()
