"""One rewrite of an Envoy bootstrap in progress (rewrite.py runs it): the edits, what it says, and
the walk over the config's keys, each to its handler (rewrite.py's `HANDLERS`, clusters.py's)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from labs.verify.envoy.config import EnvoyConfig, YamlMap
from labs.verify.envoy.routes import EnvoyRoute
from labs.verify.plan import RunPlan, handler_for
from labs.verify.rewrite import Rewritten
from labs.verify.tls import pair_in, run_pair
from labs.verify.yamledit import Edits

Handler = Callable[["Run", YamlMap, str], None]


@dataclass
class Run:
    """One rewrite in progress: the edits to the user's text, what it says, the plan, the route's
    listener and filter chain, and where the walk is (the listener's new port, the chain's index)."""

    handlers: Mapping[str, Handler]
    config: EnvoyConfig
    plan: RunPlan
    route: EnvoyRoute
    result: Rewritten
    edits: Edits
    clusters: set[Any] = field(default_factory=set)  # the names of the config's clusters
    admin_port: int = 0  # the run's own admin, on loopback
    admin_kept: bool = False  # the user's admin on TCP, moved to the run's port
    listener: YamlMap | None = None
    port: int = 0
    chain_index: int = 0
    paired: bool = False  # the run's certificate is made at write

    def note(self, message: str) -> None:
        if message not in self.result.notes:
            self.result.notes.append(message)

    def pair(self) -> tuple[Path, Path]:
        """The run's certificate and key, made when the run is written (after the loopback check)."""
        if not self.paired:
            self.paired = True
            self.result.on_write.append(lambda: run_pair(self.plan.folder))
        return pair_in(self.plan.folder)

    def visit(self, section: str, owner: YamlMap) -> None:
        """Each key's handler; a key without one is kept as written."""
        for key in list(owner):
            handler = handler_for(self.handlers, f"{section}.{key}" if section else key)
            if handler is not None:
                handler(self, owner, key)
