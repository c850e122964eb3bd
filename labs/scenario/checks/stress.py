"""Proof that the stress a scenario applies really happened: the silence, the long stream, the
load, the departure. Every variant asserts its stress, so a cure cannot pass because the thing
it cures stopped being applied (a pause the server no longer makes, streams that no longer run
at once, a client that no longer leaves).

Bounds come from the scenario's own settings (the timeout or limit its broken variant sets,
passed in by the catalogue from the same constant) and margins from the workload's token
interval, never from tight absolute numbers.
"""
from __future__ import annotations

from typing import Callable

from labs.client.durations import milliseconds
from labs.client.results import StreamResult
from labs.findings.idle_timeout import longest_silence
from labs.scenario.checks.base import threshold
from labs.scenario.model import Check, Run

# A silence or a stream must beat the timeout it proves by this many token intervals.
STRESS_MARGIN_INTERVALS = 2.0
# A cut that a timeout made comes after at least this share of it. Timers fire early: nginx
# re-arms a read timer only when it moves by more than 300 ms (NGX_TIMER_LAZY_DELAY), so its
# 1 s proxy_read_timeout was measured here cutting 903 ms after the last token. An unrelated
# failure comes at once; half the timeout tells the two apart with room for timer slack.
CUT_SHARE = 0.5
DISCONNECTS = 'streamlab_requests_aborted_total{reason="disconnect"}'


def _shortest(run: Run, value: Callable[[StreamResult], float | None]) -> float | None:
    """The smallest value over every stream (None when any stream has none): all must pass."""
    seen = [value(r) for r in run.results]
    return None if not seen or any(v is None for v in seen) else min(v for v in seen if v is not None)


def silence_outlasted(timeout_s: float, what: str) -> Check:
    """Every stream sat through a model silence clearly longer than `timeout_s` (the timeout the
    broken variant sets) and still came through: the cure faced the silence that kills it."""
    return threshold(
        f"the model's silence outlasts {what} ({timeout_s:g} s) by >= {STRESS_MARGIN_INTERVALS:g} "
        "token intervals", lambda run: _shortest(run, longest_silence),
        lambda run: timeout_s + STRESS_MARGIN_INTERVALS * run.interval_s, at_least=True,
        shown=lambda run, s: f"longest silence {milliseconds(s)}")


def cut_after_silence(timeout_s: float, what: str) -> Check:
    """The stream ended only after a long silence: the silence reached the timeout, and the
    timeout (not an earlier failure, which comes at once) ended the stream."""
    return threshold(
        f"the stream is cut after a long silence: >= {CUT_SHARE:.0%} of {what} ({timeout_s:g} s)",
        lambda run: _shortest(run, longest_silence),
        lambda run: CUT_SHARE * timeout_s, at_least=True,
        shown=lambda run, s: f"silence before the end {milliseconds(s)}")


def _lasted(result: StreamResult) -> float | None:
    return result.end_s if result.end_s is not None else result.e2e_s


def outlived(timeout_s: float, what: str) -> Check:
    """Every stream lasted clearly longer than `timeout_s`, a limit on the whole response."""
    return threshold(
        f"every stream outlives {what} ({timeout_s:g} s) by >= {STRESS_MARGIN_INTERVALS:g} token intervals",
        lambda run: _shortest(run, lambda r: r.e2e_s),
        lambda run: timeout_s + STRESS_MARGIN_INTERVALS * run.interval_s, at_least=True,
        shown=lambda run, e2e: f"shortest E2E {milliseconds(e2e)}")


def cut_at_deadline(timeout_s: float, what: str) -> Check:
    """The stream ran until `timeout_s` after the request: the whole-response timeout cut it."""
    return threshold(
        f"the stream runs until {what} cuts it: >= {CUT_SHARE:.0%} of {timeout_s:g} s",
        lambda run: _shortest(run, _lasted),
        lambda run: CUT_SHARE * timeout_s, at_least=True,
        shown=lambda run, end: f"stream ended at {milliseconds(end)}")


def sent_together(run: Run) -> int:
    """How many requests were sent while the first stream that completed still ran: the load
    that competed for a limit at once (a refused request ends at once, so counting the streams
    open at any one instant would miss the very requests a limit turned away)."""
    complete = [r.start_s + (r.e2e_s or 0.0) for r in run.results if r.outcome == "complete"]
    ends = complete or [r.start_s + (_lasted(r) or 0.0) for r in run.results]
    if not ends:
        return 0
    first_end = min(ends)
    return sum(1 for r in run.results if r.outcome != "connect-error" and r.start_s < first_end)


def sent_together_at_least(count: int, what: str) -> Check:
    """At least `count` requests were in flight together from the client's side."""
    def measure(run: Run) -> tuple[str, bool]:
        together = sent_together(run)
        return (f"{together} of {len(run.results)} requests sent while the first stream ran "
                f"(>= {count})"), together >= count
    return Check(f"the load reaches {what}: >= {count} requests at once", measure)


def server_peak_at_least(gauge: str, count: float, what: str) -> Check:
    """The server's own gauge (sampled while the workload ran) reached `count`: the load got
    through to the server, past the limit the broken variant sets."""
    def measure(run: Run) -> tuple[str, bool]:
        peak = run.peaks.get(gauge)
        shown = "never read" if peak is None else f"{peak:g}"
        return f"peak {gauge} {shown} (>= {count:g})", peak is not None and peak >= count
    return Check(f"the load gets past {what}: the server's peak {gauge} >= {count:g}", measure,
                 samples=(gauge,))


def departed(count: int | None = None) -> Check:
    """The clients meant to leave did leave, mid-stream (default: every stream)."""
    def measure(run: Run) -> tuple[str, bool]:
        expected = len(run.results) if count is None else count
        gone = [r for r in run.results if r.outcome == "disconnected" and r.disconnect_s is not None]
        events = sorted({r.content_events for r in gone})
        return (f"{len(gone)} of {len(run.results)} streams left after {events or '-'} content events "
                f"(>= {expected})"), bool(gone) and len(gone) >= expected
    who = "every client leaves" if count is None else f"{count} clients leave"
    return Check(f"{who} mid-stream (outcome disconnected)", measure)


def server_heard_departures(count: int | None = None) -> Check:
    """The server itself counted the departures (default: one per client that left)."""
    def bound(run: Run) -> float:
        if count is not None:
            return count
        return max(1, sum(1 for r in run.results if r.outcome == "disconnected"))
    return threshold("the server hears every departure (requests aborted for a disconnect)",
                     lambda run: run.metric(DISCONNECTS), bound, at_least=True,
                     fmt=lambda v: "-" if v is None else f"{v:g}",
                     shown=lambda run, n: f"{n:g} requests aborted for a disconnect")


def reloaded_mid_stream() -> Check:
    """The proxies were reloaded while every stream still ran (Workload.reload_at_s): the
    stress a reload scenario applies, proven for the cure as for the symptom."""
    def measure(run: Run) -> tuple[str, bool]:
        if run.reloaded_at_s is None:
            return f"no reload ({run.reload_error or 'none happened'})", False
        ends = [_lasted(r) for r in run.results]
        passed = bool(ends) and all(end is not None and end > run.reloaded_at_s for end in ends)
        return (f"reloaded at {milliseconds(run.reloaded_at_s)}, "
                f"streams ended at {', '.join(milliseconds(e) for e in ends)}"), passed
    return Check("the proxy was reloaded while the streams ran", measure)


def first_token_after(silence_s: float, what: str) -> Check:
    """The first token came only after (at least half of) the silence the server applies before
    it: what a variant that must wait for its headers through that silence depends on."""
    return threshold(f"the first token came after at least half of {what} ({milliseconds(silence_s)})",
                     lambda run: run.first.ttft_s, lambda run: CUT_SHARE * silence_s,
                     at_least=True, shown=lambda run, ttft: f"TTFT {milliseconds(ttft)}")
