"""disconnect-not-propagated: the client left, and the origin kept generating for nobody.

Reads `Evidence.stream` (the client left on purpose: outcome `disconnected`), `Evidence.release_s`
(how long after the departure the origin noticed: its own record, or its slots going idle; None
when it never did while the tool waited), `Evidence.silence_s` (the origin's pause right after
the departure: some proxies notice only when their next write to the client fails, and the pause
delays that write), `Evidence.heartbeat_s` (the origin's heartbeat interval through that pause,
None when it sent none) with `Evidence.heartbeats_to_notice`, and `Evidence.pacing`. A path that
passes the departure on frees the origin within a decode step or two; one that does not keeps it
busy through the pause (HAProxy without abortonclose) or to the end of the answer (nginx ignoring
client aborts). With heartbeats, a path that notices only at a write to the client notices at a
heartbeat: late is then counted from it.
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
# With heartbeats, one more of them before late: a loaded client can read the event it leaves
# after together with the next, so the proxy's first write after the departure is one heartbeat
# further on. A path the heartbeats do not help still shows late: the check's pause runs 2 s past
# this bound (labs/verify/trials.py, departure_pause_s).
SLACK_HEARTBEATS = 1


def late_bound(interval_s: float, silence_s: float | None, heartbeat_s: float | None = None,
               heartbeats: int = 1) -> float:
    """Seconds after the departure from which the origin noticed it late. With heartbeats every
    `heartbeat_s` through the pause, a path that notices only at a write to the client notices at
    the `heartbeats`-th of them (the path's kind knows how many: httpd 2.4.71 the first, Varnish
    7.1.1 the second, measured; docs/verify.md): late from one heartbeat after that
    (SLACK_HEARTBEATS), plus the same ten intervals."""
    if heartbeat_s:
        return (heartbeats + SLACK_HEARTBEATS) * heartbeat_s + LATE_INTERVALS * interval_s
    bound = LATE_INTERVALS * interval_s
    if silence_s:
        bound = min(bound, LATE_SHARE * silence_s)
    return bound


def late_after(evidence: Evidence) -> float:
    return late_bound(evidence.pacing.interval_s, evidence.silence_s, evidence.heartbeat_s,
                      evidence.heartbeats_to_notice)


def judge(evidence: Evidence) -> Verdict:
    stream, release = evidence.stream, evidence.release_s
    if stream.outcome not in ("disconnected", "timeout"):
        return untold(f"the stream ended before the client could leave ({ended(stream)})")
    bound = late_after(evidence)
    if evidence.heartbeat_s and (evidence.silence_s or 0.0) <= bound:
        return untold(f"the origin's pause ({secs(evidence.silence_s or 0.0)}) was not longer than its "
                      f"heartbeats and the margin ({secs(bound)}): a path that never notices would pass")
    left = f"the client left after {stream.content_events} events"
    if release is None:
        return Verdict(True, f"{left}; the origin never noticed it leave")
    if release >= bound:
        return Verdict(True, f"{left}; the origin noticed only {secs(release)} later "
                             f"(late from {secs(bound)})")
    return Verdict(False, f"{left}; the origin noticed {secs(release)} later (late from {secs(bound)})")
