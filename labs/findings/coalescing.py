"""coalescing: a hop groups events the origin wrote one by one into fewer writes.

Reads `Evidence.stream` (stamped by the origin: each event carries its send time) against
`Evidence.pacing`. Grouped events are COALESCED_EVENTS_PER_READ or more per socket read, and the
grouping is the path's when the median event waited HELD_INTERVALS longer than the stream's
fastest one on its way (a grouping the client's own slow reads make delays no event). A stream
held altogether is buffering's, not this kind's. Without stamps a client cannot tell a hop that
groups from an origin that writes in groups: the verdict is untold.

A stream grouped without that delay proves neither way (`grouped_too_soon`): the callers measure
one more and judge that. HAProxy without http-no-delay groups 3 events a read 105 ms late in most
streams and 2.4 a read too soon to tell in some (1 of 26 verify runs idle, 1 of 10 with both cores
busy; a CI run read one as a pass).
"""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.client.results import StreamResult
from labs.findings import buffering
from labs.findings.evidence import Evidence, Pacing, Verdict, events_per_read, hop_spread_p50, untold

COALESCED_EVENTS_PER_READ = 1.5
# Verify compared the events per read with the same request sent straight to the server (0.4
# more); the probe, which has no such request, read the hop delay. The hop delay is kept for
# both: it needs no second request, and clock offsets between origin and client cancel in it.
HELD_INTERVALS = 0.5  # the median event held this many token intervals (the haproxy guards' bar)


def judge(evidence: Evidence) -> Verdict:
    stream, pacing = evidence.stream, evidence.pacing
    if not stream.content_events:
        return untold(f"no content arrived ({stream.outcome})")
    if buffering.held(stream, pacing)[0]:
        return Verdict(False, "the events were held altogether (see buffering)")
    spread = hop_spread_p50(stream)
    if spread is None:
        return untold("the events carry no send stamp: a hop that groups them cannot be told "
                      "from an origin that writes them in groups")
    per_read = events_per_read(stream)
    grouped = per_read >= COALESCED_EVENTS_PER_READ
    late = spread >= HELD_INTERVALS * pacing.interval_s
    observed = (f"{per_read:.2f} events per read ({stream.bursts} reads for {stream.content_events} "
                f"events); hop delay p50 {milliseconds(spread)} above the fastest event")
    return Verdict(grouped and late, observed)


def grouped_too_soon(stream: StreamResult, pacing: Pacing) -> bool:
    """Grouped, stamped, not held, yet without the hop delay that makes the grouping the path's:
    a loaded client's slow reads, or a grouping hop this stream's timing hid."""
    spread = hop_spread_p50(stream)
    return (stream.content_events > 0 and spread is not None and not buffering.held(stream, pacing)[0]
            and events_per_read(stream) >= COALESCED_EVENTS_PER_READ and spread < HELD_INTERVALS * pacing.interval_s)
