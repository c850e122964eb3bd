"""Reusable symptom and cure checks. Every margin is a multiple of the workload's token interval.

A streamed response has TTFT near the first token's due time and one socket read per event; a
held one has TTFT near E2E and few reads. The constants below say how many intervals of slack a
noisy shared machine gets before a check changes its verdict.
"""
from __future__ import annotations

from typing import Callable

from labs.scenario import Check, Run

# A streamed first token may be late by this many token intervals (scheduling noise, proxy start).
STREAM_SLACK_INTERVALS = 3.0
# A held stream's first token arrives within this many intervals of the end of the stream.
HELD_SLACK_INTERVALS = 2.0
# Share of content events that must arrive in reads of their own for a stream to count as streamed.
STREAMED_READ_SHARE = 0.75


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def check(label: str) -> Callable[[Callable[[Run], tuple[str, bool]]], Check]:
    """Decorator form: `@check("label") def name(run): return observed, passed`."""
    def wrap(measure: Callable[[Run], tuple[str, bool]]) -> Check:
        return Check(label, measure)
    return wrap


def outcome_is(*expected: str, share: float = 1.0) -> Check:
    """At least `share` of the streams ended with one of the expected outcomes."""
    wanted = " or ".join(expected)
    label = f"outcome {wanted}" if share == 1.0 else f"outcome {wanted} for >= {share:.0%} of streams"

    def measure(run: Run) -> tuple[str, bool]:
        counts = run.outcomes()
        hits = sum(counts.get(name, 0) for name in expected)
        observed = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))
        return observed, hits >= share * len(run.results)
    return Check(label, measure)


def outcome_not(*unwanted: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        counts = run.outcomes()
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), not any(counts.get(u) for u in unwanted)
    return Check(f"no stream ends {' or '.join(unwanted)}", measure)


def streamed() -> Check:
    """TTFT near the first token's due time and most events in reads of their own."""
    def measure(run: Run) -> tuple[str, bool]:
        result, w = run.first, run.workload
        limit = w.first_due_s + STREAM_SLACK_INTERVALS * w.interval_s
        events, bursts = result.content_events, result.bursts
        ok = (result.ttft_s is not None and result.ttft_s <= limit and events > 1
              and bursts >= STREAMED_READ_SHARE * events)
        return f"TTFT {_ms(result.ttft_s)} (limit {_ms(limit)}), {bursts} reads for {events} events", ok
    return Check(f"streams: TTFT within {STREAM_SLACK_INTERVALS:g} token intervals of the first "
                 f"token, >= {STREAMED_READ_SHARE:.0%} of events in their own read", measure)


def held_to_end() -> Check:
    """The first token arrives only near the end: the stream was held in one lump (or a few)."""
    def measure(run: Run) -> tuple[str, bool]:
        result, w = run.first, run.workload
        if result.ttft_s is None or result.e2e_s is None:
            return "no content arrived", False
        slack = HELD_SLACK_INTERVALS * w.interval_s
        held = result.ttft_s >= result.e2e_s - slack
        few = result.bursts <= max(2, result.content_events // 5)
        return (f"TTFT {_ms(result.ttft_s)}, E2E {_ms(result.e2e_s)}, "
                f"{result.bursts} reads for {result.content_events} events"), held and few
    return Check(f"held: TTFT within {HELD_SLACK_INTERVALS:g} token intervals of E2E, "
                 "events arrive in a few lumps", measure)


def ttft_late(intervals: float = 5.0) -> Check:
    """TTFT far past the first token's due time, without requiring one lump."""
    def measure(run: Run) -> tuple[str, bool]:
        result, w = run.first, run.workload
        limit = w.first_due_s + intervals * w.interval_s
        return f"TTFT {_ms(result.ttft_s)} (due {_ms(w.first_due_s)})", (
            result.ttft_s is not None and result.ttft_s > limit)
    return Check(f"TTFT later than {intervals:g} token intervals after the first token was due", measure)


def coalesced(min_events_per_read: float = 1.5) -> Check:
    """Events arrive grouped: a hop sends several per write (mean events per read above 1)."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        reads = result.bursts
        mean = result.content_events / reads if reads else 0.0
        return f"{mean:.2f} events per read ({reads} reads)", mean >= min_events_per_read
    return Check(f"events coalesced: >= {min_events_per_read:g} content events per socket read", measure)


def complete_with_done() -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        bad = [r for r in run.results if not (r.outcome == "complete" and r.saw_done)]
        return f"{len(run.results) - len(bad)}/{len(run.results)} complete with [DONE]", not bad
    return Check("every stream completes with [DONE]", measure)


def server_metric_at_most(metric: str, bound: float, label: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        value = run.metric(metric)
        return f"{value:g}", value <= bound
    return Check(label, measure)


def server_metric_at_least(metric: str, bound: float, label: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        value = run.metric(metric)
        return f"{value:g}", value >= bound
    return Check(label, measure)


def proxy_stat_at_least(stat_suffix: str, bound: int, label: str) -> Check:
    """An Envoy admin counter (any stat name ending with `stat_suffix`) reached `bound`."""
    def measure(run: Run) -> tuple[str, bool]:
        total = sum(value for stats in run.proxy_stats.values()
                    for name, value in stats.items() if name.endswith(stat_suffix))
        return f"{stat_suffix} = {total}", total >= bound
    return Check(label, measure)


def status_is(status: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sorted({str(r.status) for r in run.results})
        return "status " + ", ".join(seen), all(r.status == status for r in run.results)
    return Check(f"HTTP status {status} (the failure comes after the headers)", measure)


def status_seen(status: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        hits = sum(1 for r in run.results if r.status == status)
        return f"{hits}/{len(run.results)} streams got {status}", hits > 0
    return Check(f"some streams get HTTP {status}", measure)


def outcome_not_only(outcome: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        counts = run.outcomes()
        others = sum(n for name, n in counts.items() if name != outcome)
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), others > 0
    return Check(f"some streams fail (not every outcome is {outcome})", measure)


def content_encoded(encoding: str | None) -> Check:
    """The response's Content-Encoding as the client saw it (None: not compressed)."""
    def measure(run: Run) -> tuple[str, bool]:
        seen = run.first.content_encoding
        return f"Content-Encoding {seen or 'none'}", seen == encoding
    return Check(f"Content-Encoding {encoding or 'none'}", measure)


def _hop_p50(run: Run) -> float | None:
    from labs.measurements import percentile
    return percentile(run.first.hop_delays, 50)


def hop_delay_at_least(intervals: float) -> Check:
    """The median event spent at least `intervals` token intervals between server and client."""
    def measure(run: Run) -> tuple[str, bool]:
        hop, limit = _hop_p50(run), intervals * run.workload.interval_s
        return f"hop delay p50 {_ms(hop)} (>= {_ms(limit)})", hop is not None and hop >= limit
    return Check(f"events held: median hop delay >= {intervals:g} token interval", measure)


def hop_delay_at_most(intervals: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        hop, limit = _hop_p50(run), intervals * run.workload.interval_s
        return f"hop delay p50 {_ms(hop)} (<= {_ms(limit)})", hop is not None and hop <= limit
    return Check(f"events pass through: median hop delay <= {intervals:g} token interval", measure)


def _ttfts(run: Run) -> list[float]:
    return sorted(r.ttft_s for r in run.results if r.ttft_s is not None)


def ttft_spread_at_least(share_of_stream: float) -> Check:
    """Some streams' first token waited most of a whole stream: they queued behind others."""
    def measure(run: Run) -> tuple[str, bool]:
        ttfts = _ttfts(run)
        e2e = min((r.e2e_s for r in run.results if r.e2e_s is not None), default=None)
        if not ttfts or e2e is None:
            return "no content", False
        return (f"TTFT min {_ms(ttfts[0])}, max {_ms(ttfts[-1])} (shortest stream {_ms(e2e)})",
                ttfts[-1] - ttfts[0] >= share_of_stream * e2e)
    return Check(f"TTFT in waves: the last first token waits >= {share_of_stream:.0%} of a stream", measure)


def ttft_p99_within(intervals: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        from labs.measurements import percentile
        p99 = percentile(_ttfts(run), 99)
        limit = run.workload.first_due_s + intervals * run.workload.interval_s
        return f"TTFT p99 {_ms(p99)} (limit {_ms(limit)})", p99 is not None and p99 <= limit
    return Check(f"every stream starts promptly: TTFT p99 within {intervals:g} token intervals", measure)


def _held(result, interval_s: float, first_due_s: float) -> bool:
    return result.ttft_s is None or result.ttft_s > first_due_s + STREAM_SLACK_INTERVALS * interval_s


def culprit_hop(expected: str | None) -> Check:
    """From the bisection: the innermost entry point that still sees a late first token."""
    def measure(run: Run) -> tuple[str, bool]:
        w = run.workload
        late = [label for label, results in run.hops.items()
                if _held(results[0], w.interval_s, w.first_due_s)]
        culprit = late[-1].split("enter at ", 1)[-1] if late else None
        # Hop names are like "nginx:41234"; compare the proxy part.
        name = culprit.split(":", 1)[0] if culprit else None
        shown = ", ".join(f"{label}: TTFT {_ms(r[0].ttft_s)}" for label, r in run.hops.items())
        return f"culprit {name or 'none'} ({shown})", name == expected
    return Check(f"bisection names {expected or 'no hop'} as the hop that holds the stream", measure)


def tokens_for_nobody_at_least(share: float) -> Check:
    """Most of what the engine generated was never read: the server did not hear the client leave."""
    def measure(run: Run) -> tuple[str, bool]:
        generated = run.metric("streamlab_tokens_generated_total")
        return (f"{run.tokens_for_nobody:g} of {generated:g} generated tokens unread",
                generated > 0 and run.tokens_for_nobody >= share * generated)
    return Check(f"tokens generated for nobody: >= {share:.0%} of all generated", measure)


def tokens_for_nobody_at_most(tokens: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        return f"{run.tokens_for_nobody:g} tokens", run.tokens_for_nobody <= tokens
    return Check(f"tokens generated for nobody: at most {tokens} (a decode step or two)", measure)


def release_at_least(intervals: float = 0.0, *, silence_share: float = 0.0) -> Check:
    """The server kept working after the client left: for `silence_share` of the workload's pause."""
    def limit(run: Run) -> float:
        return intervals * run.workload.interval_s + silence_share * float(run.workload.lab.get("pause_s", 0.0))

    def measure(run: Run) -> tuple[str, bool]:
        bound = limit(run)
        return f"server busy {_ms(run.release_s)} after the client left (>= {_ms(bound)})", (
            run.release_s is None or run.release_s >= bound)
    what = f"{silence_share:.0%} of the silence" if silence_share else f"{intervals:g} token intervals"
    return Check(f"the server hears of the departure late: busy for >= {what} after it", measure)


def release_within(intervals: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        bound = intervals * run.workload.interval_s
        return f"server idle {_ms(run.release_s)} after the client left (<= {_ms(bound)})", (
            run.release_s is not None and run.release_s <= bound)
    return Check(f"the server frees the slot within {intervals:g} token intervals of the departure", measure)


# ---- server and client layers (labs/catalogue/server.py, client.py) ----------------------------

def _pooled_gaps(run: Run) -> list[float]:
    return [gap for result in run.results for gap in result.gaps]


def _gap_p(run: Run, p: float) -> float | None:
    from labs.measurements import percentile
    return percentile(_pooled_gaps(run), p)


def gap_p99_at_least(intervals: float) -> Check:
    """Every stream's tokens bunch up: the p99 gap (pooled over all streams) is far above pacing."""
    def measure(run: Run) -> tuple[str, bool]:
        p50, p99, limit = _gap_p(run, 50), _gap_p(run, 99), intervals * run.workload.interval_s
        return f"gap p50 {_ms(p50)}, p99 {_ms(p99)} (>= {_ms(limit)})", p99 is not None and p99 >= limit
    return Check(f"gap p99 over all streams >= {intervals:g} token intervals", measure)


def gap_p99_at_most(intervals: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        p50, p99, limit = _gap_p(run, 50), _gap_p(run, 99), intervals * run.workload.interval_s
        return f"gap p50 {_ms(p50)}, p99 {_ms(p99)} (<= {_ms(limit)})", p99 is not None and p99 <= limit
    return Check(f"gap p99 over all streams <= {intervals:g} token intervals", measure)


def replacement_chars_at_least(count: int = 1) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sum(r.replacement_chars for r in run.results)
        return f"{seen} U+FFFD in {len(run.first.text)} characters", seen >= count
    return Check(f"the client renders U+FFFD (>= {count})", measure)


def text_is_script(index: int = 0, script: str | None = None, label: str | None = None) -> Check:
    """Stream `index` delivered exactly `script` (default: the workload's), with no U+FFFD."""
    def measure(run: Run) -> tuple[str, bool]:
        result, expected = run.results[index], script if script is not None else run.workload.script
        shown = f"{result.text!r}" if len(result.text) <= 60 else f"{len(result.text)} characters"
        return (f"{shown}, {result.replacement_chars} U+FFFD, "
                f"{'exact' if result.text == expected else 'differs from ' + repr(expected)}"), (
            result.text == expected)
    return Check(label or "the text is exactly the script, character for character", measure)


def stop_leaked(index: int, stops: str | tuple[str, ...]) -> Check:
    """Part of a stop sequence reached the client in stream `index`."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.results[index]
        leak = result.stop_leak(stops)
        return f"text {result.text!r}: leaked {leak!r}", leak is not None
    return Check("part of the stop sequence reaches the client", measure)


def no_stop_leak(index: int, stops: str | tuple[str, ...]) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        result = run.results[index]
        leak = result.stop_leak(stops)
        return f"text {result.text!r}: leaked {leak!r}", leak is None and result.content_events > 0
    return Check("no part of the stop sequence reaches the client", measure)


def finish_reason_is(reason: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sorted({str(r.finish_reason) for r in run.results})
        return "finish_reason " + ", ".join(seen), all(r.finish_reason == reason for r in run.results)
    return Check(f"finish_reason {reason!r}", measure)


def text_cut_short() -> Check:
    """Fewer characters than the script arrived: the answer is incomplete whatever the ending said."""
    def measure(run: Run) -> tuple[str, bool]:
        result, script = run.first, run.workload.script
        return f"{len(result.text)} of {len(script)} characters", len(result.text) < len(script)
    return Check("the answer is cut short (less text than the script)", measure)


def error_reported() -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        return f"{result.outcome}: {result.error!r}, [DONE] {'seen' if result.saw_done else 'missing'}", (
            result.outcome == "error-in-band" and bool(result.error) and result.saw_done)
    return Check("the client reports the in-band error, then [DONE]", measure)


def heartbeats_at_least(count: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = min(r.heartbeats for r in run.results)
        return f"{seen} `: ping` comments", seen >= count
    return Check(f"SSE comment heartbeats reach the client (>= {count})", measure)


def content_events_at_most(count: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = max(r.content_events for r in run.results)
        return f"{seen} content events", seen <= count
    return Check(f"at most {count} content events before the end", measure)


def socket_reads_spread(share: float = STREAMED_READ_SHARE) -> Check:
    """The bytes themselves arrived spread over many socket reads: every hop streamed them."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        return f"{result.reads} socket reads for {result.content_events} events", (
            result.content_events > 1 and result.reads >= share * result.content_events)
    return Check(f"the bytes arrived in >= {share:.0%} as many socket reads as events (the hops streamed)",
                 measure)


def _slot_held_mean(run: Run) -> float | None:
    count = run.metric("streamlab_slot_held_after_disconnect_seconds_count")
    return run.metric("streamlab_slot_held_after_disconnect_seconds_sum") / count if count else None


def slot_held_at_least(intervals: float) -> Check:
    """After each departure the slot stayed busy for many decode steps (server histogram)."""
    def measure(run: Run) -> tuple[str, bool]:
        held, limit = _slot_held_mean(run), intervals * run.workload.interval_s
        count = run.metric("streamlab_slot_held_after_disconnect_seconds_count")
        return f"slot held {_ms(held)} on average after {count:g} departures (>= {_ms(limit)})", (
            held is not None and held >= limit)
    return Check(f"slots stay held after the client left: >= {intervals:g} token intervals on average",
                 measure)


def slot_held_at_most(intervals: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        held, limit = _slot_held_mean(run), intervals * run.workload.interval_s
        count = run.metric("streamlab_slot_held_after_disconnect_seconds_count")
        return f"slot held {_ms(held)} on average after {count:g} departures (<= {_ms(limit)})", (
            held is not None and held <= limit)
    return Check(f"slots freed within {intervals:g} token intervals of each departure", measure)


def _stayed(run: Run) -> list[float | None]:
    """TTFT of the streams that did not leave on purpose (the requests that came after)."""
    return [r.ttft_s for r in run.results if r.outcome != "disconnected"]


def stayers_ttft_at_least(intervals: float) -> Check:
    """The requests that arrived after others left waited for a slot: their first token is late."""
    def measure(run: Run) -> tuple[str, bool]:
        ttfts, w = _stayed(run), run.workload
        limit = w.first_due_s + intervals * w.interval_s
        known = [t for t in ttfts if t is not None]
        shown = ", ".join(_ms(t) for t in ttfts)
        return f"TTFT of the later requests: {shown} (>= {_ms(limit)})", (
            bool(ttfts) and len(known) == len(ttfts) and min(known) >= limit)
    return Check(f"requests arriving after the departures queue: TTFT >= {intervals:g} token intervals",
                 measure)


def stayers_ttft_within(intervals: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        ttfts, w = _stayed(run), run.workload
        limit = w.first_due_s + intervals * w.interval_s
        known = [t for t in ttfts if t is not None]
        shown = ", ".join(_ms(t) for t in ttfts)
        return f"TTFT of the later requests: {shown} (<= {_ms(limit)})", (
            bool(ttfts) and len(known) == len(ttfts) and max(known) <= limit)
    return Check(f"requests arriving after the departures start at once: TTFT <= {intervals:g} token "
                 "intervals", measure)


def _per_token(run: Run, metric: str) -> float | None:
    tokens = run.metric("streamlab_tokens_generated_total")
    return run.metric(metric) / tokens if tokens else None


def _writes_text(run: Run) -> tuple[float | None, str]:
    """Writes per token, and (shown, not judged: it depends on the machine) server CPU per token."""
    value = _per_token(run, "streamlab_stream_writes_total")
    frames = _per_token(run, "streamlab_sse_frames_total")
    cpu = _per_token(run, "process_cpu_seconds_total")
    cpu_text = "-" if cpu is None else f"{cpu * 1e6:.0f} us"
    return value, f"{_num(value)} writes and {_num(frames)} SSE frames per token; server CPU {cpu_text} per token"


def writes_per_token_at_least(bound: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        value, text = _writes_text(run)
        return text, value is not None and value >= bound
    return Check(f"the server writes once per token (>= {bound:g} writes per token)", measure)


def writes_per_token_at_most(bound: float) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        value, text = _writes_text(run)
        return text, value is not None and value <= bound
    return Check(f"writes coalesced: <= {bound:g} writes per token", measure)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def failed_share_at_least(share: float, outcomes: tuple[str, ...] = ("reset", "http-error")) -> Check:
    """At least `share` of the streams failed before any content, with one of `outcomes`."""
    def measure(run: Run) -> tuple[str, bool]:
        counts = run.outcomes()
        hits = sum(counts.get(o, 0) for o in outcomes)
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        statuses = sorted({str(r.status) for r in run.results if r.outcome == "http-error"})
        extra = f" (HTTP {', '.join(statuses)})" if statuses else ""
        return f"{shown}{extra}", hits >= share * len(run.results)
    return Check(f">= {share:.0%} of the streams fail ({' or '.join(outcomes)})", measure)


def ttft_max_at_least(intervals: float) -> Check:
    """Some stream's first token left at least `intervals` token intervals after it was due."""
    def measure(run: Run) -> tuple[str, bool]:
        ttfts, w = _ttfts(run), run.workload
        limit = w.first_due_s + intervals * w.interval_s
        if not ttfts:
            return "no content", False
        return f"TTFT min {_ms(ttfts[0])}, max {_ms(ttfts[-1])} (>= {_ms(limit)})", ttfts[-1] >= limit
    return Check(f"tokens leave late: the latest first token >= {intervals:g} token intervals after due",
                 measure)
