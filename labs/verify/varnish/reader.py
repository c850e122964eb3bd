"""Varnish (VCL), as verify reads and runs it: the stages of labs/verify/reader.py."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from labs.verify.rules import AtNextWrite
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan
from labs.verify.reader import InEffect
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route
from labs.verify.varnish import config, read, rewrite, routes, rules
from labs.verify.varnish.config import Vcl


class VarnishReader:
    proxy = "varnish"
    example = "default.vcl"
    # VCL's version line (every VCL 4 file opens with it), or a backend with its .host.
    shape = re.compile(r"^\s*vcl\s+\d\.\d\s*;|^\s*backend\s+[\w-]+\s*\{[^}]*\.host\s*=", re.M)
    nothing_proxied = "no backend is declared"
    defaults = None
    # Measured on Varnish 7.1.1 (`labs verify proxies/fixed/varnish.vcl --check disconnect`): without
    # heartbeats the server noticed 2.17 s after the client left and generated 3 tokens for nobody
    # (httpd: 2); with heartbeats every 0.5, 1 and 2 s, after 1.09, 2.06 and 4.06 s: at the second,
    # 2 sent. As the third token suggests, its write to the client fails at the first, and the
    # fetch from the server stops only at its next read from it.
    departure_at_write = AtNextWrite("Varnish 7.1 notices a departed client only when a write to it fails", 2)
    rules = rules.RULES
    handlers = rewrite.HANDLERS
    kept = rewrite.KEPT

    def parse(self, path: Path, wanted: RouteWanted) -> Vcl:
        """The VCL and its includes, compiled by varnishd (the release that runs it) to be read."""
        vcl = config.parse(path)
        rewrite.checked(vcl, wanted.series)
        return vcl

    def proxied(self, vcl: Vcl) -> list[str]:
        return routes.proxied(vcl)

    def match(self, vcl: Vcl, request: Request) -> Route | None:
        return routes.match(vcl, request)

    def settings(self, vcl: Vcl, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        return read.settings(vcl, chosen.route.handle)

    def rewrite(self, vcl: Vcl, chosen: Chosen, plan: RunPlan) -> Rewritten:
        return rewrite.rewrite(vcl, plan)

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        return rewrite.addresses(rewritten)

    def directives(self, vcl: Vcl) -> Iterable[str]:
        return {directive.name for directive in rewrite.entries(vcl)}


READER = VarnishReader()
