"""What verify needs to know of one proxy's configs: how to tell one apart, read it, and run it here.

One `ConfigKind` per proxy, declared in that proxy's folder (`labs/verify/nginx/kind.py`, ...) and
listed once in `labs/verify/kinds.py`; the shared modules (`detect`, `run`, `judge`, `cli`) read the
table and name no proxy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from labs.verify.model import Options, Reading, RouteWanted, Suspicion
from labs.verify.rewrite import Rewritten
from labs.verify.versions import DefaultsTable


@dataclass(frozen=True)
class AtNextWrite:
    """A proxy that notices a client that left only when a write to it fails, whatever its config
    (measured): through a silence the server generates for nobody until it writes again."""

    why: str
    """Said in the suspicion, e.g. "httpd 2.4 notices a departed client only when ..."."""
    heartbeats: int
    """With heartbeats through the silence, the one at which the departure reaches the server
    (the token written just after the client left is the first write, and it succeeds)."""


@dataclass(frozen=True)
class ConfigKind:
    proxy: str
    """The proxy's name, as the proxies' own table (`proxies.kinds`) and `--proxy` spell it."""
    example: str
    """A file name a user recognises (the help's "nginx.conf, haproxy.cfg, envoy.yaml")."""
    shape: re.Pattern[str]
    """A line only this proxy's configs have: detection tries the kinds in the table's order."""
    read: Callable[[Path, RouteWanted], Reading]
    """The static reading: the route chosen (the one asked for, else the one serving the chat
    API) and the settings in effect on it."""
    suspicions: Callable[[Reading, Options], list[Suspicion]]
    """What the settings in effect suggest (labs/verify/rules.py): one Suspicion per fault."""
    run_here: Callable[[Path, Reading, int, Path, bool], Rewritten]
    """(config, its reading, lab port, folder, in a container) -> the config rewritten to loopback
    and written into the folder, the reading's route reachable on `listen_port`; refuses
    (NotLoopback) a rewrite that still names another address."""
    fallback: Mapping[str, tuple[str, str]]
    """Finding kind -> (the setting to look at, the fix), for a measured fault no setting explains."""
    defaults: DefaultsTable | None = None
    """This proxy's defaults by version, where --proxy-version selects them (None: verify knows one
    set; --proxy-version then picks the release that runs it, labs/verify/releases.py)."""
    departure_at_write: AtNextWrite | None = None
    """Set when this proxy notices a departure only at a write, whatever its config (None: a
    setting decides). Without --heartbeat every config of it is then suspected of
    disconnect-not-propagated (labs/verify/rules.py), so --quick measures it; with it, the
    disconnect check allows its `heartbeats`."""

    def looks_like(self, text: str) -> bool:
        return self.shape.search(text) is not None
