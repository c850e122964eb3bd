"""What the settings in effect suggest, compared with the catalogue: one `Suspicion` per fault.

Each proxy's rules are a table (`labs/verify/<proxy>/rules.py` `RULES`, named by its reader): a
`Rule` names the finding kind, the setting behind it (where the finding is placed), the fix in
general words, and, where the setting alone can tell, a test of the reading that gives the
evidence and the fix as the directive to write. A measured fault no setting explains is placed at
the first rule of its kind, with its general fix (`fallback`): so every finding kind has a rule on
every reader, and a new kind is a row in each table. A suspicion the measurement confirms becomes
a `failure`; one it does not confirm stays a `warning`, with the reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from labs.findings import FindingKind
from labs.verify.model import Options, Reading, Setting, Suspicion

SSE = "text/event-stream"
DEPARTURE = "disconnect-not-propagated"



@dataclass(frozen=True)
class AtNextWrite:
    """A proxy that notices a client that left only when a write to it fails, whatever its config
    (measured): through a silence the server generates for nobody until it writes again."""

    why: str
    """Said in the suspicion, e.g. "httpd 2.4 notices a departed client only when ..."."""
    heartbeats: int
    """With heartbeats through the silence, the one at which the departure reaches the server
    (the token written just after the client left is the first write, and it succeeds)."""

def timeout_fix(limit: float, options: Options) -> int:
    """An idle limit with room (x1.5, in tens of seconds) above the longest silence expected."""
    return int(math.ceil(max(limit, options.max_silence_s) * 1.5 / 10) * 10)


def departure_at_write(at_write: AtNextWrite, r: Reading, o: Options, setting: str) -> list[Suspicion]:
    """A proxy that notices a departed client only at a write to it: without a heartbeat interval
    (--heartbeat) the server keeps generating for nobody through any silence, whatever the
    config; `setting`: the one the finding is placed at (the route's)."""
    if o.heartbeat_s is not None:
        return []
    cost = "one interval" if at_write.heartbeats == 1 else f"{at_write.heartbeats} intervals"
    return [Suspicion(
        DEPARTURE, r.get(setting).where,
        f"{at_write.why}: a client that leaves while the server is silent is noticed only when the "
        "server writes again, and until then it generates for nobody (no --heartbeat given: a silence "
        "without heartbeats)",
        f"have the server send `: ping` heartbeats through its silences (a departure then costs about {cost} "
        "of generation), and run verify again with --heartbeat SECONDS, their interval; no setting of the "
        "proxy makes it notice sooner", ("disconnect",))]


@dataclass(frozen=True)
class Suspect:
    """What one rule found: the evidence, the fix as the directive to write, and an idle limit
    (seconds) where the fault is one; `where`: another setting's place, when the rule reads two
    and the other one is the one to change."""

    evidence: str
    fix: str
    limit_s: float | None = None
    where: str | None = None


@dataclass(frozen=True)
class Rule:
    """One finding kind on one proxy: the setting behind it and the fix in general words; `suspect`
    (None: the reading alone cannot tell, only the measurement shows it) reads the settings in
    effect and says what they suggest, or None."""

    kind: FindingKind
    setting: str
    general: str
    checks: tuple[str, ...] = ()  # the trials (labs.verify.trials) that can show it
    suspect: Callable[[Reading, Options], Suspect | None] | None = None


def suspicions(rules: Sequence[Rule], reading: Reading, options: Options) -> list[Suspicion]:
    """Every rule that suspects something of this reading, in the table's order."""
    found = []
    for rule in rules:
        said = rule.suspect(reading, options) if rule.suspect is not None else None
        if said is not None:
            found.append(Suspicion(rule.kind, said.where or reading.get(rule.setting).where, said.evidence,
                                   said.fix, rule.checks, said.limit_s))
    return found


def fallback(rules: Sequence[Rule], kind: FindingKind) -> tuple[str, str]:
    """(the setting, the general fix) for a measured fault of `kind` no setting explains: the first
    rule of that kind."""
    rule = next((r for r in rules if r.kind == kind), None)
    if rule is None:
        raise KeyError(f"no rule of kind {kind!r}: every reader has one per finding kind")
    return rule.setting, rule.general


def connection_cap(setting: Setting, o: Options, toward: str, fix: str, then: str = "") -> Suspect | None:
    """A cap on the connections to the server below --streams, which opens one per stream: `toward`
    names the server as the proxy calls it, `fix` the directive that lifts the cap, `then` what the
    proxy answers past it."""
    if not setting.value or setting.value >= o.streams:
        return None
    return Suspect(f"{setting.text}: at most {setting.value} connections to {toward}, one per stream (--streams "
                   f"is {o.streams}){then}", f"{fix} (or remove it). Cost: more streams reach the model server at "
                   "once; its own concurrency limit must then bound them")
