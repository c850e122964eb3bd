"""Which releases a scenario runs on besides the lab's choice, and what it drops to show each
release's own defaults (Scenario.since): read by the runner, the guards and the reports."""
from __future__ import annotations

from typing import Any

from labs.scenario.model import Scenario, Variant
from labs.lab.hops import hop_kind
from proxies.kinds import KINDS


def own_defaults(scenario: Scenario) -> Variant | None:
    """What the broken variant drops to leave its proxies at their own defaults (Since.own_defaults),
    None when no release change names any."""
    dropped: dict[str, dict[str, Any]] = {}
    for change in scenario.since:
        for hop in scenario.path:
            if hop_kind(hop) == change.proxy and change.own_defaults:
                dropped.setdefault(hop, {}).update(change.own_defaults)
    return Variant(proxy=dropped) if dropped else None


def older_releases(scenario: Scenario) -> list[str]:
    """`PROXY=X.Y` of each older release of the proxies whose behaviour here changed (`since`)."""
    return [f"{change.proxy}={release.series}" for change in scenario.since
            for release in KINDS[change.proxy].releases[:-1]]
