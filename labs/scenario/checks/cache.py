"""A cache between client and server: was a stream replayed from it, or did each user get a live
one? Margins are token intervals of the workload, as everywhere."""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.scenario.checks.base import threshold
from labs.client.results import StreamResult
from labs.scenario.model import Check, Run

REQUESTS_OK = 'streamlab_requests_total{status="200"}'
# A replay comes from memory: all of it within this share of one token interval.
REPLAY_SHARE = 0.5
# A live stream's events span at least this share of the time the server took to make them.
LIVE_SHARE = 0.5


def _span(result: StreamResult) -> float | None:
    times = [e.t for e in result.content]
    return times[-1] - times[0] if len(times) > 1 else None


def replayed_from_cache(paced_index: int = 0) -> Check:
    """A later stream got the whole answer at once (a complete stream, every event within half a
    token interval), where stream `paced_index` (the first, unless a cut stream came before it) was
    paced: it came from the cache, not the model."""
    def measure(run: Run) -> tuple[str, bool]:
        if len(run.results) < paced_index + 2:
            return f"{len(run.results)} stream(s)", False
        first, later = run.results[paced_index], run.results[-1]
        span, paced = _span(later), _span(first)
        passed = (later.outcome == "complete" and later.content_events == first.content_events
                  and span is not None and paced is not None
                  and span <= REPLAY_SHARE * run.interval_s < paced)
        return (f"stream {paced_index + 1}'s events over {milliseconds(paced)}, the last one's over "
                f"{milliseconds(span)} in {later.reads} read(s)", passed)
    return Check(f"a later user's whole answer arrived within {REPLAY_SHARE:g} token intervals "
                 "(replayed by the cache)", measure)


def every_stream_live(start: int = 0) -> Check:
    """Every stream from `start` on (the first, unless a cut stream came before them) had its
    events come as the model made them (spread over at least half the time their pacing takes),
    so none was a replay."""
    def measure(run: Run) -> tuple[str, bool]:
        judged = run.results[start:]
        spans = [_span(r) for r in judged]
        needs = [LIVE_SHARE * (r.content_events - 1) * run.interval_s for r in judged]
        passed = bool(judged) and all(
            r.outcome == "complete" and s is not None and s >= need
            for r, s, need in zip(judged, spans, needs))
        return ", ".join(milliseconds(s) for s in spans) + " of events per stream", passed
    return Check(f"every stream is live: its events span >= {LIVE_SHARE:.0%} of their pacing", measure)


def server_requests(bound: float, *, at_least: bool) -> Check:
    """How many chat completions the server itself answered with 200 during the variant."""
    word = "at least" if at_least else "at most"
    return threshold(f"the server answered {word} {bound:g} request(s)",
                     lambda run: run.metric(REQUESTS_OK), lambda run: bound, at_least=at_least,
                     fmt=lambda v: "-" if v is None else f"{v:g}")
