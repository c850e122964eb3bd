"""total-timeout: a limit on the whole response cuts long answers.

Reads `Evidence.stream`, a stream the origin was asked to keep up for `Evidence.duration_s`
without ever going silent (an event every `Evidence.pacing.interval_s`: tokens, or heartbeats
between them), so that no idle timer can end it. A stream that completed passed, if it really ran
(at least RAN_SHARE of the duration); one the path ended was cut, and the limit is when: the close
itself when it came within CLOSE_SLACK_INTERVALS of the last byte, else (a hop held the connection
open after the cut, as Envoy's delayed_close_timeout does for a second) half an interval after
the last byte. A client that gave up on a silent stream read no limit.
"""
from __future__ import annotations

from labs.client.results import StreamResult
from labs.findings.evidence import Evidence, Verdict, ended, untold

RAN_SHARE = 0.9  # a complete stream shorter than this share of the duration proved nothing
CLOSE_SLACK_INTERVALS = 1.5


def cut_time(stream: StreamResult, interval_s: float) -> float | None:
    last, closed = stream.e2e_s, stream.end_s
    if last is None:
        return closed
    if closed is not None and closed - last <= CLOSE_SLACK_INTERVALS * interval_s:
        return closed
    return last + interval_s / 2


def judge(evidence: Evidence) -> Verdict:
    stream, duration = evidence.stream, evidence.duration_s
    asked = f"a {duration:.1f} s stream" if duration is not None else "the stream"
    if stream.outcome == "complete":
        ran = stream.e2e_s or 0.0
        if duration is not None and ran < RAN_SHARE * duration:
            return untold(f"{asked} ended after {ran:.1f} s by itself")
        return Verdict(False, f"{asked} completed after {ran:.1f} s ({stream.content_events} events)")
    if stream.outcome in ("timeout", "disconnected"):
        return untold(f"{asked} went silent or was left ({ended(stream)}): no limit could be read")
    cut = cut_time(stream, evidence.pacing.interval_s)
    if cut is None:
        return untold(f"{asked} ended with nothing received ({ended(stream)})")
    late = stream.end_s is not None and stream.end_s - cut > 2 * evidence.pacing.interval_s
    closed = f"; the connection closed only at {stream.end_s:.2f} s" if late else ""
    return Verdict(True, f"{asked} that was never silent was cut {cut:.2f} s after the request "
                         f"({ended(stream)}{closed})", limit_s=round(cut, 3))
