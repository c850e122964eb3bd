"""A step's batch of streams in numbers: outcomes, TTFT and gap percentiles, the steady
delivered rate, the TTFT histogram."""
from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from labs import client
from labs.load.results import StepResult
from labs.client.results import StreamResult, aggregate, percentile, percentile_band

def summarize(path: str, batch: client.Batch, tokens: int, tokens_per_s: float,
              duration_s: float) -> StepResult:
    """The client's side of a step (the resources and the evidence are added by the caller)."""
    agg = aggregate(batch.results, batch.client_cpu_s, batch.wall_s)
    hops = [h for r in batch.results for h in r.hop_delays]
    rate, window = steady_rate(batch.results, batch.wall_s)
    errors = Counter(_error_key(r.error) for r in batch.results if r.outcome != "complete" and r.error)
    return StepResult(
        path=path, concurrency=len(batch.results), tokens_per_stream=tokens,
        tokens_per_s=tokens_per_s, duration_s=duration_s, outcomes=agg["outcomes"],
        statuses=agg["statuses"], errors=dict(errors.most_common(6)),
        ttft_p50_s=agg["ttft_p50_s"], ttft_p99_s=agg["ttft_p99_s"], ttft_max_s=agg["ttft_max_s"],
        gap_p50_s=agg["gap_p50_s"], gap_p99_s=agg["gap_p99_s"], gap_max_s=agg["gap_max_s"],
        hop_p50_s=percentile(hops, 50), hop_p99_s=percentile(hops, 99),
        content_events=agg["content_events"], wall_s=batch.wall_s,
        delivered_tok_s=rate, steady_window_s=window,
        steady_gap_p99_s=percentile(steady_gaps(batch.results), 99),
        ttft_histogram=ttft_histogram([r.ttft_s for r in batch.results if r.ttft_s is not None]),
        client_cpu_s=batch.client_cpu_s, client_cpu_per_event_us=agg["client_cpu_per_event_us"],
        percentile_bands_s=percentile_bands([r.ttft_s for r in batch.results if r.ttft_s is not None],
                                            [g for r in batch.results for g in r.gaps]))


def percentile_bands(ttfts: Sequence[float], gaps: Sequence[float]) -> dict[str, list[float]]:
    """The bands of TTFT and gap p50 and p99 (see StepResult.percentile_bands_s)."""
    bands = {}
    for name, values in (("ttft", ttfts), ("gap", gaps)):
        for p in (50, 99):
            if (band := percentile_band(values, p)) is not None:
                bands[f"{name}_p{p}"] = band
    return bands


def steady_window(results: Sequence[StreamResult]) -> tuple[float, float] | None:
    """(begin, end) on the batch's clock while at least 95% of the completed streams were open:
    from the 95th percentile of their first tokens to the 5th percentile of their ends (one
    straggler, e.g. a connection whose SYN was retransmitted, must not erase the window; it
    still shows in TTFT, and it costs the rate its own share). None when no window of at
    least 0.5 s exists (streams that ran in waves). Times: a stream's `start_s` + `t`."""
    done = [r for r in results if r.outcome == "complete" and r.ttft_s is not None and r.e2e_s]
    if not done:
        return None
    begin = percentile([r.start_s + (r.ttft_s or 0.0) for r in done], 95)
    end = percentile([r.start_s + (r.e2e_s or 0.0) for r in done], 5)
    if begin is None or end is None or end - begin < 0.5:
        return None
    return begin, end


def steady_rate(results: Sequence[StreamResult], wall_s: float) -> tuple[float, float | None]:
    """(tok/s, window s) while every completed stream was open; see StepResult.delivered_tok_s.
    Failed streams count for what they delivered inside the window, and not for its bounds."""
    window = steady_window(results)
    if window is not None:
        begin, end = window
        n = sum(1 for r in results for e in r.events
                if e.kind == "content" and begin <= r.start_s + e.t <= end)
        return n / (end - begin), end - begin
    content = sum(r.content_events for r in results)
    return (content / wall_s if wall_s > 0 else 0.0), None


def steady_gaps(results: Sequence[StreamResult]) -> list[float]:
    """Gaps between content events that both arrived inside the steady window."""
    window = steady_window(results)
    if window is None:
        return []
    begin, end = window
    gaps = []
    for r in results:
        times = [r.start_s + e.t for e in r.events if e.kind == "content"]
        gaps += [b - a for a, b in zip(times, times[1:]) if a >= begin and b <= end]
    return gaps


TTFT_EDGES = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)


def ttft_histogram(ttfts: Sequence[float]) -> dict[str, int]:
    """Counts per TTFT bucket: a ladder at 1, 3, 7 s is SYN-ACK retransmits, a wave at one
    stream's length is a proxy that stopped accepting."""
    counts: Counter[str] = Counter()
    for t in ttfts:
        edge = next((e for e in TTFT_EDGES if t < e), None)
        counts[f"<{edge:g} s" if edge is not None else f">={TTFT_EDGES[-1]:g} s"] += 1
    order = [f"<{e:g} s" for e in TTFT_EDGES] + [f">={TTFT_EDGES[-1]:g} s"]
    return {k: counts[k] for k in order if counts[k]}


def _error_key(error: str) -> str:
    error = re.sub(r"0x[0-9a-f]+", "0x..", error)
    return re.sub(r"\d+(\.\d+)?", "N", error)[:120]
