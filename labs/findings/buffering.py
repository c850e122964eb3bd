"""buffering: a hop holds the events and lets them go late, in lumps (or all at the end).

Reads `Evidence.stream` against `Evidence.pacing`. The two shapes a buffering hop gives:

- held to the end: the first token arrives within HELD_SLACK_INTERVALS of the stream's end, the
  events in a few lumps (by arrival time: one lump can span several socket reads), at the end of
  a stream the origin made at its pace (a stream made all at once ends sooner, and says nothing
  about a hop that would hold a paced one);
- late in lumps: TTFT LATE_INTERVALS past due, and LUMP_EVENTS_PER_READ or more events per read.

With an unknown pace (an origin the probe cannot steer) a lump is believed only in a stream long
enough that the origin cannot have sent it at once, and then only as a warning; in a shorter
stream a lump, late or not, is untold (never a pass).
"""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.client.results import StreamResult
from labs.findings.evidence import Evidence, Pacing, Verdict, events_per_read, untold

LATE_INTERVALS = 5.0  # TTFT this many token intervals past due: the path held the first token
# Held events arrive in lumps of at least this many. Verify asked for 3.0 and probe for 4.0 (the
# catalogue's nginx-buffering guard too): 4.0 is kept, the bar the catalogue's real runs of a
# buffering nginx clear (12 to 20 events in one or two reads), because a late stream grouped by
# two or three is a slow first token plus coalescing, which `coalescing` names, not a held stream.
LUMP_EVENTS_PER_READ = 4.0
HELD_SLACK_INTERVALS = 2.0  # a held stream's first token comes within this of its end
HELD_READ_SHARE = 5  # held: at most one lump per this many events (or two lumps)
# Events that arrive closer together than this share of the origin's interval came in one lump:
# a held body let go at once can still reach the client in several socket reads (a loaded client
# on the 2-core CI machine read a held Django body as 6 reads within 1 ms), so a lump is counted by
# arrival time, not by read.
LUMP_GAP_SHARE = 0.5
# Without a known pace: a lump counts only in a stream this long, of this many events.
PLAIN_MIN_E2E_S = 1.0
PLAIN_MIN_EVENTS = 8
PLAIN_REASON = ("without a canary origin the probe cannot tell a hop that holds events from an "
                "origin that sends them together")


def paced_end(stream: StreamResult, pacing: Pacing) -> float:
    """The earliest E2E of a stream made at the origin's pace, less the held slack."""
    return pacing.first_due_s + (stream.content_events - 1 - HELD_SLACK_INTERVALS) * pacing.interval_s


def arrival_lumps(stream: StreamResult, pacing: Pacing) -> int:
    """Groups of content events that arrived together: a new group starts after a gap of at
    least LUMP_GAP_SHARE of the origin's interval (every event its own group when it streamed)."""
    if not stream.content_events:
        return 0
    return 1 + sum(1 for gap in stream.gaps if gap >= LUMP_GAP_SHARE * pacing.interval_s)


def held_to_end(stream: StreamResult, pacing: Pacing) -> tuple[bool, str]:
    if stream.ttft_s is None or stream.e2e_s is None:
        return False, "no content arrived"
    held = stream.ttft_s >= stream.e2e_s - HELD_SLACK_INTERVALS * pacing.interval_s
    lumps = arrival_lumps(stream, pacing)
    few = lumps <= max(2, stream.content_events // HELD_READ_SHARE)
    paced = stream.e2e_s >= paced_end(stream, pacing)
    return held and few and paced, (
        f"TTFT {milliseconds(stream.ttft_s)}, E2E {milliseconds(stream.e2e_s)} "
        f"(paced: >= {milliseconds(paced_end(stream, pacing))}), "
        f"{stream.content_events} events in {lumps} lumps ({stream.bursts} reads)")


def late_in_lumps(stream: StreamResult, pacing: Pacing) -> tuple[bool, str]:
    due = pacing.first_due_s + LATE_INTERVALS * pacing.interval_s
    late = stream.ttft_s is not None and stream.ttft_s >= due
    lumps = events_per_read(stream) >= LUMP_EVENTS_PER_READ
    return late and lumps, (f"TTFT {milliseconds(stream.ttft_s)} (late from {milliseconds(due)}), "
                            f"{events_per_read(stream):.1f} events per read "
                            f"(lumps from {LUMP_EVENTS_PER_READ:g})")


def held(stream: StreamResult, pacing: Pacing) -> tuple[bool, str]:
    """Either shape of a held stream, and what was seen (also read by compression, coalescing)."""
    to_end, shown = held_to_end(stream, pacing)
    if to_end:
        return True, f"held to the end: {shown}"
    lumped, lumps = late_in_lumps(stream, pacing)
    return lumped, (f"late, in lumps: {lumps}" if lumped else f"streamed: {shown}; {lumps}")


def judge(evidence: Evidence) -> Verdict:
    stream, pacing = evidence.stream, evidence.pacing
    if not stream.content_events:
        return untold(f"no content arrived ({stream.outcome})")
    fault, observed = held(stream, pacing)
    if not pacing.known:
        return _without_canary(stream, fault, observed)
    return Verdict(fault, observed)


def _without_canary(stream: StreamResult, fault: bool, observed: str) -> Verdict:
    """With a guessed pace a lump is a warning in a long stream and proves nothing in a short one
    (a fast origin may have sent it at once, or a hop held it: a fast origin behind a buffering
    hop arrives early and whole); a stream that arrived event by event flowed, whatever its pace."""
    lumped = fault or events_per_read(stream) >= LUMP_EVENTS_PER_READ
    if lumped and ((stream.e2e_s or 0.0) < PLAIN_MIN_E2E_S or stream.content_events < PLAIN_MIN_EVENTS):
        return untold(f"TTFT {milliseconds(stream.ttft_s)}, E2E {milliseconds(stream.e2e_s)}, "
                      f"{stream.content_events} events in {stream.bursts} reads: in lumps, but too short a "
                      f"stream to tell without a canary (a "
                      f"lump counts in a stream of {PLAIN_MIN_E2E_S:g} s and {PLAIN_MIN_EVENTS} events or more)")
    if fault:
        return Verdict(True, observed, unsure=PLAIN_REASON)
    return Verdict(False, observed)
