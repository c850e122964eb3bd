"""disconnect-not-propagated: the client left, and the origin kept generating for nobody.

Reads `Evidence.stream` (the client left on purpose: outcome `disconnected`), `Evidence.release_s`
(how long after the departure the origin noticed: its own record, or its slots going idle; None
when it never did while the tool waited), `Evidence.silence_s` (the origin's pause right after
the departure: some proxies notice only when their next write to the client fails, and the pause
delays that write) and `Evidence.pacing`. A path that passes the departure on frees the origin
within a decode step or two; one that does not keeps it busy through the pause (HAProxy without
abortonclose) or to the end of the answer (nginx ignoring client aborts).
"""
from __future__ import annotations

from labs.findings.evidence import Evidence, Verdict, ended, secs, untold

# Noticed late: after this many token intervals (ten decode steps: the catalogue's cured runs
# free the slot within four, a busy machine's scheduling included)...
LATE_INTERVALS = 10.0
# ...or after this share of the pause, when a shorter pause would hide a path that notices only
# on its next write. Verify waited 10 intervals (0.5 s at its 20 tok/s) and the probe half its
# pause (1 s of 2 s): the smaller of the two is kept, which is verify's bar at their common
# pacing; the probe's paths that notice at once do so in milliseconds.
LATE_SHARE = 0.5


def late_after(evidence: Evidence) -> float:
    bound = LATE_INTERVALS * evidence.pacing.interval_s
    if evidence.silence_s:
        bound = min(bound, LATE_SHARE * evidence.silence_s)
    return bound


def judge(evidence: Evidence) -> Verdict:
    stream, release = evidence.stream, evidence.release_s
    if stream.outcome not in ("disconnected", "timeout"):
        return untold(f"the stream ended before the client could leave ({ended(stream)})")
    bound = late_after(evidence)
    left = f"the client left after {stream.content_events} events"
    if release is None:
        return Verdict(True, f"{left}; the origin never noticed it leave")
    if release >= bound:
        return Verdict(True, f"{left}; the origin noticed only {secs(release)} later "
                             f"(late from {secs(bound)})")
    return Verdict(False, f"{left}; the origin noticed {secs(release)} later (late from {secs(bound)})")
