"""What the settings in effect suggest, compared with the catalogue: one `Suspicion` per fault.

The rules of each proxy live in its folder (`labs/verify/<proxy>/rules.py`, named by its
`ConfigKind`); what they share is here. Each rule names the directive behind the fault (its `where`), the fix as the directive to write,
and the dynamic check that can show it. A suspicion the measurement confirms becomes a `failure`;
one it does not confirm stays a `warning`, with the reason.
"""
from __future__ import annotations

import math

from labs.verify.kind import AtNextWrite
from labs.verify.model import Options, Reading, Suspicion

SSE = "text/event-stream"
DEPARTURE = "disconnect-not-propagated"


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
