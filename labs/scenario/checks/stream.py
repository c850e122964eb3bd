"""The shape of one stream in time: streamed, held, late, coalesced, held back per hop."""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.client.results import StreamResult, percentile
from labs.findings import Pacing, buffering
from labs.findings.buffering import HELD_SLACK_INTERVALS
from labs.findings.evidence import events_per_read
from labs.scenario.checks.base import (STREAM_SLACK_INTERVALS, STREAMED_READ_SHARE, after_due, intervals,
                                       threshold)
from labs.scenario.model import Check, Run


def pacing(run: Run) -> Pacing:
    """The run's baseline as a judge reads it: the workload's first-token due time and pace."""
    return Pacing(run.first_due_s, run.interval_s)


def paced_end(run: Run, result: StreamResult) -> float:
    """The earliest E2E of a stream whose tokens were made at the workload's pace (see
    labs.findings.buffering): a stream that ends sooner was made all at once, and says nothing
    about a hop that would hold a paced one."""
    return buffering.paced_end(result, pacing(run))


def streamed() -> Check:
    """TTFT near the first token's due time, most events in reads of their own, over the pace."""
    def measure(run: Run) -> tuple[str, bool]:
        result, limit = run.first, after_due(STREAM_SLACK_INTERVALS)(run)
        events, bursts = result.content_events, result.bursts
        paced = result.e2e_s is not None and result.e2e_s >= paced_end(run, result)
        ok = (result.ttft_s is not None and result.ttft_s <= limit and events > 1
              and bursts >= STREAMED_READ_SHARE * events and paced)
        return (f"TTFT {milliseconds(result.ttft_s)} (limit {milliseconds(limit)}), "
                f"{bursts} reads for {events} events, E2E {milliseconds(result.e2e_s)} "
                f"(paced: >= {milliseconds(paced_end(run, result))})"), ok
    return Check(f"streams: TTFT within {STREAM_SLACK_INTERVALS:g} token intervals of the first "
                 f"token, >= {STREAMED_READ_SHARE:.0%} of events in their own read, at the "
                 "workload's pace", measure)


def held_to_end() -> Check:
    """The first token arrives only near the end of a paced stream: held in one lump (or a few),
    as the buffering judge reads it."""
    def measure(run: Run) -> tuple[str, bool]:
        held, observed = buffering.held_to_end(run.first, pacing(run))
        return observed, held
    return Check(f"held: TTFT within {HELD_SLACK_INTERVALS:g} token intervals of E2E, "
                 "events arrive in a few lumps, at the end of a stream made at the workload's pace",
                 measure)


def ttft_late(n: float = 5.0) -> Check:
    """TTFT far past the first token's due time, without requiring one lump."""
    return threshold(f"TTFT later than {n:g} token intervals after the first token was due",
                     lambda run: run.first.ttft_s, after_due(n), at_least=True,
                     shown=lambda run, ttft: f"TTFT {milliseconds(ttft)}")


def coalesced(min_events_per_read: float = 1.5) -> Check:
    """Events arrive grouped: a hop sends several per write (mean events per read above 1)."""
    return threshold(f"events coalesced: >= {min_events_per_read:g} content events per socket read",
                     lambda run: events_per_read(run.first), lambda run: min_events_per_read, at_least=True,
                     shown=lambda run, mean: f"{mean:.2f} events per read ({run.first.bursts} reads)",
                     fmt=lambda v: "-" if v is None else f"{v:g}")


def socket_reads_spread(share: float = STREAMED_READ_SHARE) -> Check:
    """The bytes themselves arrived spread over many socket reads: every hop streamed them."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        return f"{result.reads} socket reads for {result.content_events} events", (
            result.content_events > 1 and result.reads >= share * result.content_events)
    return Check(f"the bytes arrived in >= {share:.0%} as many socket reads as events (the hops streamed)",
                 measure)


def content_encoded(encoding: str | None) -> Check:
    """The response's Content-Encoding as the client saw it (None: not compressed)."""
    def measure(run: Run) -> tuple[str, bool]:
        seen = run.first.content_encoding
        return f"Content-Encoding {seen or 'none'}", seen == encoding
    return Check(f"Content-Encoding {encoding or 'none'}", measure)


def _hop_p50(run: Run) -> float | None:
    return percentile(run.first.hop_delays, 50)


def hop_delay_at_least(n: float) -> Check:
    """The median event spent at least `n` token intervals between server and client."""
    return threshold(f"events held: median hop delay >= {n:g} token interval", _hop_p50, intervals(n),
                     at_least=True, shown=lambda run, hop: f"hop delay p50 {milliseconds(hop)}")


def hop_delay_at_most(n: float) -> Check:
    return threshold(f"events pass through: median hop delay <= {n:g} token interval", _hop_p50,
                     intervals(n), at_least=False, shown=lambda run, hop: f"hop delay p50 {milliseconds(hop)}")


def heartbeats_at_least(count: int) -> Check:
    return threshold(f"SSE comment heartbeats reach the client (>= {count})",
                     lambda run: min(r.heartbeats for r in run.results), lambda run: count,
                     at_least=True, fmt=lambda v: "-" if v is None else f"{v:g}",
                     shown=lambda run, seen: f"{seen:g} `: ping` comments")


def content_events_at_most(count: int) -> Check:
    return threshold(f"at most {count} content events before the end",
                     lambda run: max(r.content_events for r in run.results), lambda run: count,
                     at_least=False, fmt=lambda v: "-" if v is None else f"{v:g}",
                     shown=lambda run, seen: f"{seen:g} content events")


def headers_at_least(seconds: float, why: str) -> Check:
    """The response headers came no sooner than `seconds` (a hop held them back)."""
    return threshold(f"the headers arrived no sooner than {milliseconds(seconds)} ({why})",
                     lambda run: run.first.headers_s, lambda run: seconds, at_least=True,
                     shown=lambda run, at: f"headers at {milliseconds(at)}")


def headers_prompt() -> Check:
    """The response headers came within the streamed slack of the request (nothing held them)."""
    return threshold(f"the headers arrived within {STREAM_SLACK_INTERVALS:g} token intervals",
                     lambda run: run.first.headers_s, intervals(STREAM_SLACK_INTERVALS), at_least=False,
                     shown=lambda run, at: f"headers at {milliseconds(at)}")


def http_version_is(version: str) -> Check:
    """The protocol the client really spoke (HTTP/2 only where ALPN chose `h2`)."""
    def measure(run: Run) -> tuple[str, bool]:
        seen = run.first.http_version
        return f"HTTP/{seen or '?'}", seen == version
    return Check(f"the client spoke HTTP/{version}", measure)
