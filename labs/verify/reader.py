"""What verify needs of one proxy's configs: the stages every proxy's folder fills.

`labs/verify/run.py` owns the order (parse once, choose the route, read the settings in effect,
apply the rules, rewrite, check loopback, write); a reader answers each stage with its own parser
and its own matching semantics. One reader per proxy, `READER` in `labs/verify/<proxy>/reader.py`,
listed once in `labs/verify/readers.py`; the shared modules name no proxy.
`tests/verify/test_reader_contract.py` holds every reader in the table to this contract, and a type
checker reads the table against this `Protocol`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from labs.verify.rules import AtNextWrite
from labs.verify.model import RouteWanted, Setting
from labs.verify.plan import RunPlan
from labs.verify.rewrite import Rewritten
from labs.verify.route import Chosen, Request, Route
from labs.verify.rules import Rule
from labs.verify.versions import DefaultsTable


@dataclass
class InEffect:
    """The settings in effect on the chosen route, what the reading noticed on the way, and the
    proxy version whose defaults it used."""

    settings: dict[str, Setting]
    notes: list[str] = field(default_factory=list)
    version: str | None = None


class ConfigReader(Protocol):
    # Read-only members: a reader declares them as plain class attributes (`proxy = "nginx"`).
    @property
    def proxy(self) -> str:
        """The proxy's name, as the proxies' own table (`proxies.kinds`) and `--proxy` spell it."""

    @property
    def example(self) -> str:
        """A file name a user recognises (the help's "nginx.conf, haproxy.cfg, envoy.yaml")."""

    @property
    def shape(self) -> re.Pattern[str]:
        """A line only this proxy's configs have: detection tries the readers in the table's order."""

    @property
    def nothing_proxied(self) -> str:
        """Said when the config proxies nothing at all: "no location has proxy_pass"."""

    @property
    def defaults(self) -> DefaultsTable | None:
        """This proxy's defaults by version, where --proxy-version selects them (None: one set)."""

    @property
    def departure_at_write(self) -> AtNextWrite | None:
        """Set when this proxy notices a departure only at a write, whatever its config."""

    @property
    def rules(self) -> Sequence[Rule]:
        """What the settings in effect suggest (labs/verify/rules.py): one rule per finding kind at least."""

    @property
    def handlers(self) -> Mapping[str, Callable[..., Any]]:
        """The rewrite, per directive (labs/verify/plan.py): `name` or `prefix*` -> its handler."""

    @property
    def kept(self) -> frozenset[str]:
        """The directives the rewrite keeps as written, declared: none is left unlooked-at."""

    def parse(self, path: Path, wanted: RouteWanted) -> Any:
        """The config and every file it reads (UnusableInput with file and line when it cannot be)."""

    def proxied(self, config: Any) -> list[str]:
        """Every proxied route, described for the output (the error when none serves lists them)."""

    def match(self, config: Any, request: Request) -> Route | None:
        """The route that serves `request` as the proxy would choose it, if it proxies it."""

    def settings(self, config: Any, chosen: Chosen, wanted: RouteWanted) -> InEffect:
        """Every streaming setting in effect on the chosen route (each rule's setting among them),
        with the defaults of the version asked for (`wanted.version`) or of the release that runs
        it (`wanted.series`)."""

    def rewrite(self, config: Any, chosen: Chosen, plan: RunPlan) -> Rewritten:
        """The config as it runs here, in memory (nothing written): listeners on free loopback
        ports (the chosen route's reachable on `listen_port`), every upstream the lab's server."""

    def addresses(self, rewritten: Rewritten) -> list[tuple[str, str]]:
        """(where, host) of every address the rewritten config names, read from its text."""

    def directives(self, config: Any) -> Iterable[str]:
        """The name of every directive the config has, as `handlers` and `kept` spell them."""
