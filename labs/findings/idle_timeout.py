"""idle-timeout: a silence longer than a limit ends the stream.

Reads `Evidence.stream`, a stream in which the origin kept one silence of `Evidence.silence_s`
(before the headers, before the first token, or in mid-stream) with heartbeats off. A stream that
completed passed, if the silence really happened (the longest wait for content was at least
KEPT_SHARE of it); one that did not is cut, and the limit is how long into the silence the cut
came: the time from the last content event (or the request) to the end of the exchange, or to the
error status a hop answered before any header of the origin's.
"""
from __future__ import annotations

from labs.client.results import StreamResult
from labs.findings.evidence import Evidence, Verdict, ended, secs, untold

# A silence counts as kept when the client waited at least this share of it for content (the
# origin's timers and the client's clock differ by scheduling noise, never by a tenth).
KEPT_SHARE = 0.9


def longest_silence(stream: StreamResult) -> float | None:
    """The longest time the client waited for content: before the first token, between two
    tokens, or from the last one to where the stream ended (a cut during a silence). Heartbeats
    are not content: they are what keeps an idle timer quiet during the model's silence."""
    times = [e.t for e in stream.content]
    end = stream.end_s if stream.end_s is not None else stream.e2e_s
    if end is None and not times:
        return None
    marks = [0.0, *times, *([end] if end is not None else [])]
    return max(b - a for a, b in zip(marks, marks[1:])) if len(marks) > 1 else None


def cut_into_silence(stream: StreamResult) -> float | None:
    """How long after the silence began the path ended the stream (None: it did not end it)."""
    if stream.outcome in ("complete", "timeout", "disconnected") or stream.end_s is None:
        return None
    if stream.status is not None and stream.status >= 400 and stream.ttfb_s is not None:
        return stream.ttfb_s  # a hop answered an error page instead of the origin's headers
    content = stream.content
    start = content[-1].t if content else 0.0
    return max(0.0, stream.end_s - start)


def judge(evidence: Evidence) -> Verdict:
    stream, silence = evidence.stream, evidence.silence_s
    asked = f"a {silence:g} s silence" if silence is not None else "the silence"
    if stream.outcome == "complete":
        kept = longest_silence(stream) or 0.0
        if silence is not None and kept < KEPT_SHARE * silence:
            return untold(f"{asked} did not happen (longest wait for content {kept:.1f} s)")
        return Verdict(False, f"{asked} ({kept:.1f} s without content): complete")
    if stream.outcome == "disconnected":
        return untold(f"the client left during {asked}")
    cut = cut_into_silence(stream)
    if cut is None:
        return Verdict(True, f"{asked}: {ended(stream)}; the client gave up waiting, "
                             f"no limit could be read")
    return Verdict(True, f"{asked} after {stream.content_events} tokens: {ended(stream)}, cut "
                         f"{secs(cut)} into the silence", limit_s=round(cut, 3))
