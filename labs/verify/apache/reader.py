"""Apache httpd, as verify reads and runs it: the stages of labs/verify/reader.py."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from labs.verify.apache import config, read, rewrite, routes, rules
from labs.verify.apache.config import ApacheConfig
from labs.verify.rules import AtNextWrite
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route


class ApacheReader:
    proxy = "apache"
    example = "apache2.conf"
    # A section or directive only httpd has, at the start of a line (case-blind, as httpd reads).
    shape = re.compile(r"^\s*(<VirtualHost[\s>]|<Location(Match)?[\s>]|ProxyPass(Match)?\s|ServerRoot\s|"
                       r"LoadModule\s+\w+_module\s)", re.M | re.I)
    nothing_proxied = "no ProxyPass, <Location> ProxyPass or RewriteRule [P]"
    defaults = None
    # Measured on httpd 2.4.71 (`labs verify proxies/fixed/apache.conf --check disconnect`): without
    # heartbeats the server noticed 2.12 s after the client left, at the end of its 2 s silence;
    # with heartbeats every 0.5, 1 and 2 s, after 0.57, 1.06 and 2.07 s: at the first, 1 sent.
    departure_at_write = AtNextWrite("httpd 2.4 notices a departed client only when a write to it fails", 1)
    rules = rules.RULES
    handlers = rewrite.HANDLERS
    kept = rewrite.KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> ApacheConfig:
        return config.parse(path, wanted.main)

    def proxied(self, parsed: ApacheConfig) -> list[str]:
        return routes.every_route(parsed)

    def match(self, parsed: ApacheConfig, request: Request) -> Route | None:
        return routes.match(parsed, request)

    def settings(self, parsed: ApacheConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return read.settings(parsed, chosen.route.handle)

    def rewrite(self, parsed: ApacheConfig, chosen: Chosen, plan: RunPlan) -> Rewritten:
        return rewrite.rewrite(parsed, chosen.route.handle, chosen.route.host, plan)

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return rewrite.addresses(rewritten)

    def directives(self, parsed: ApacheConfig) -> Iterable[str]:
        return {d.key for d in parsed.main.walk(every=True)}


READER = ApacheReader()
