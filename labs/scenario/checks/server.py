"""The server's side, from its /metrics: work done for nobody, slots held, writes per token."""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.scenario.checks.base import intervals, num, threshold
from labs.scenario.model import Check, Run


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def server_metric_at_least(metric: str, bound: float, label: str) -> Check:
    return threshold(label, lambda run: run.metric(metric), lambda run: bound, at_least=True, fmt=_count)


def server_metric_at_most(metric: str, bound: float, label: str) -> Check:
    return threshold(label, lambda run: run.metric(metric), lambda run: bound, at_least=False, fmt=_count)


def tokens_for_nobody_at_least(share: float) -> Check:
    """Most of what the engine generated was never read: the server did not hear the client leave."""
    def measure(run: Run) -> tuple[str, bool]:
        generated = run.metric("streamlab_tokens_generated_total")
        return (f"{run.tokens_for_nobody:g} of {generated:g} generated tokens unread",
                generated > 0 and run.tokens_for_nobody >= share * generated)
    return Check(f"tokens generated for nobody: >= {share:.0%} of all generated", measure)


def tokens_for_nobody_at_most(tokens: int) -> Check:
    return threshold(f"tokens generated for nobody: at most {tokens} (a decode step or two)",
                     lambda run: run.tokens_for_nobody, lambda run: tokens, at_least=False, fmt=_count)


def release_at_least(n: float = 0.0, *, silence_share: float = 0.0) -> Check:
    """The server kept working after the client left: `n` intervals plus a share of the pause.

    Still busy when the lab stopped waiting (release_s None) counts as late, which it is.
    """
    def bound(run: Run) -> float:
        return n * run.interval_s + silence_share * float(run.knobs.get("pause_s", 0.0))

    def measure(run: Run) -> tuple[str, bool]:
        limit = bound(run)
        return f"server busy {milliseconds(run.release_s)} after the client left (>= {milliseconds(limit)})", (
            run.release_s is None or run.release_s >= limit)
    what = f"{silence_share:.0%} of the silence" if silence_share else f"{n:g} token intervals"
    return Check(f"the server hears of the departure late: busy for >= {what} after it", measure)


def release_within(n: float) -> Check:
    return threshold(f"the server frees the slot within {n:g} token intervals of the departure",
                     lambda run: run.release_s, intervals(n), at_least=False,
                     shown=lambda run, s: f"server idle {milliseconds(s)} after the client left")


def _slot_held_mean(run: Run) -> float | None:
    count = run.metric("streamlab_slot_held_after_disconnect_seconds_count")
    return run.metric("streamlab_slot_held_after_disconnect_seconds_sum") / count if count else None


def _shown_slot(run: Run, held: float | None) -> str:
    departures = run.metric("streamlab_slot_held_after_disconnect_seconds_count")
    return f"slot held {milliseconds(held)} on average after {departures:g} departures"


def slot_held_at_least(n: float) -> Check:
    """After each departure the slot stayed busy for many decode steps (server histogram)."""
    return threshold(f"slots stay held after the client left: >= {n:g} token intervals on average",
                     _slot_held_mean, intervals(n), at_least=True, shown=_shown_slot)


def slot_held_at_most(n: float) -> Check:
    return threshold(f"slots freed within {n:g} token intervals of each departure",
                     _slot_held_mean, intervals(n), at_least=False, shown=_shown_slot)


def _per_token(run: Run, metric: str) -> float | None:
    tokens = run.metric("streamlab_tokens_generated_total")
    return run.metric(metric) / tokens if tokens else None


def _writes_per_token(run: Run) -> float | None:
    return _per_token(run, "streamlab_stream_writes_total")


def _shown_writes(run: Run, writes: float | None) -> str:
    """Writes and frames per token, and (shown, not judged: it depends on the machine) server CPU."""
    cpu = _per_token(run, "process_cpu_seconds_total")
    cpu_text = "-" if cpu is None else f"{cpu * 1e6:.0f} us"
    frames = _per_token(run, "streamlab_sse_frames_total")
    return f"{num(writes)} writes and {num(frames)} SSE frames per token; server CPU {cpu_text} per token"


def writes_per_token_at_least(bound: float) -> Check:
    return threshold(f"the server writes once per token (>= {bound:g} writes per token)",
                     _writes_per_token, lambda run: bound, at_least=True, shown=_shown_writes, fmt=num)


def writes_per_token_at_most(bound: float) -> Check:
    return threshold(f"writes coalesced: <= {bound:g} writes per token",
                     _writes_per_token, lambda run: bound, at_least=False, shown=_shown_writes, fmt=num)
