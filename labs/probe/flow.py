"""Does the stream flow? Buffering, coalescing and compression, judged on one stamped stream.

The canary sends the catalogue's own workload (one event per token, ten a second, each stamped
with its send time). The judgement is the catalogue's: `labs.scenario.checks` decides whether a stream was
held to its end, came late in lumps, or came grouped, with margins in token intervals.
"""
from __future__ import annotations

from typing import Any

from labs import client
from labs.scenario.checks import stream as shape
from labs.findings import FindingKind, UnusableInput
from labs.client.results import StreamResult, percentile
from labs.probe import knobs
from labs.probe.base import (Context, Observation, brief, hop_spread_p50, how_it_ended, ms, skipped,
                             spent)
from labs.scenario.model import Run

GZIP = "gzip, deflate"  # what httpx (and so the OpenAI SDK) sends
# Without a canary the origin's pacing is unknown: a lump counts only in a stream this long.
PLAIN_MIN_E2E_S = 1.0
PLAIN_MIN_EVENTS = 8
PLAIN_REASON = ("without a canary origin the probe cannot tell a hop that holds events from an "
                "origin that sends them together")
# A hop holds an event this many token intervals (the catalogue's haproxy guards use the same).
HELD_INTERVALS = 0.5
STREAM_TIMEOUT_S = 60.0
FLOW_NEEDS_S = 5.0  # the stamped stream lasts about 2 s


async def measure(ctx: Context, hop: int, *, gzip: bool) -> StreamResult:
    """The stamped stream through entry `hop`, with or without Accept-Encoding (cached per run)."""
    key = ("flow", hop, gzip)
    if key not in ctx.notes:
        ctx.progress(f"stream through {ctx.path.urls[hop]} "
                     f"({'Accept-Encoding: gzip' if gzip else 'no Accept-Encoding'})")
        ctx.budget.need(FLOW_NEEDS_S, "a short stream")
        model = ctx.path.model or ""
        body = knobs.stream_body(model) if ctx.path.origin == "streamlab" else knobs.plain_body(model)
        result = await client.measure_stream(
            ctx.path.completions(hop), body,
            headers=ctx.path.headers(), accept_encoding=GZIP if gzip else None,
            total_timeout_s=ctx.budget.cap(STREAM_TIMEOUT_S))
        spent(ctx, result)
        if result.outcome != "complete":
            detail = f": {result.error}" if result.error else ""
            if result.body_snippet:
                detail += f" {result.body_snippet[:300]!r}"
            raise UnusableInput(f"a short stream through {ctx.path.urls[hop]} did not complete "
                                f"({how_it_ended(result)}{detail}); nothing else can be judged")
        ctx.notes[key] = result
    return ctx.notes[key]


def _run(result: StreamResult) -> Run:
    return Run(variant="broken", workload=knobs.STREAM_WORKLOAD, results=[result])


def held(result: StreamResult) -> tuple[bool, str]:
    """Held to the end, or late and in lumps: the two shapes a buffering hop gives."""
    run = _run(result)
    to_end, late, lumps = shape.held_to_end()(run), shape.ttft_late()(run), shape.coalesced(4.0)(run)
    if to_end.passed:
        return True, to_end.observed
    if late.passed and lumps.passed:
        return True, f"{late.observed}; {lumps.observed}"
    return False, shape.streamed()(run).observed


def _interval() -> float:
    return knobs.STREAM_WORKLOAD.interval_s


class Buffering:
    name, kind, canary_only = "buffering", "buffering", False

    async def observe(self, ctx: Context, hop: int) -> Observation:
        result = await measure(ctx, hop, gzip=False)
        fault, observed = self.judge(ctx, result)
        if ctx.path.origin == "streamlab":
            evidence = (f"{observed} (TTFT {ms(result.ttft_s)}, E2E {ms(result.e2e_s)}; "
                        f"the origin sent {result.content_events} events "
                        f"{_interval() * 1000:.0f} ms apart, one per write)")
        else:
            evidence = f"{observed} (TTFT {ms(result.ttft_s)}, E2E {ms(result.e2e_s)})"
        return Observation(self.name, self.kind, fault, observed, evidence if fault else "",
                           measurements={"identity": brief(result)},
                           reason=None if ctx.path.origin == "streamlab" else PLAIN_REASON)

    def judge(self, ctx: Context, result: StreamResult) -> tuple[bool, str]:
        fault, observed = held(result)
        if ctx.path.origin != "streamlab":
            fault = (fault and (result.e2e_s or 0.0) >= PLAIN_MIN_E2E_S
                     and result.content_events >= PLAIN_MIN_EVENTS)
        return fault, observed

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        return self.judge(ctx, await measure(ctx, hop, gzip=False))[0]


class Coalescing:
    name, kind, canary_only = "coalescing", "coalescing", True

    def judge(self, result: StreamResult) -> tuple[bool, str]:
        if held(result)[0]:
            return False, "the events were held altogether (see buffering)"
        grouped = shape.coalesced(1.5)(_run(result))
        spread = hop_spread_p50(result)
        late = spread is not None and spread >= HELD_INTERVALS * _interval()
        observed = f"{grouped.observed}; hop delay p50 {ms(spread)} above the fastest event"
        return grouped.passed and late, observed

    async def observe(self, ctx: Context, hop: int) -> Observation:
        result = await measure(ctx, hop, gzip=False)
        fault, observed = self.judge(result)
        evidence = (f"{observed}: a hop grouped events the origin wrote one by one "
                    f"{_interval() * 1000:.0f} ms apart")
        return Observation(self.name, self.kind, fault, observed, evidence if fault else "",
                           measurements={"hop_delay_spread_p50_s": hop_spread_p50(result)})

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        return self.judge(await measure(ctx, hop, gzip=False))[0]


class Compression:
    name, kind, canary_only = "compression-delay", "compression-delay", False

    def judge(self, identity: StreamResult, gzipped: StreamResult, canary: bool) -> tuple[bool, str, bool]:
        """(fault, observed, could tell)."""
        encoding = gzipped.content_encoding
        if encoding is None:
            return False, "the path did not compress the stream (Accept-Encoding: gzip sent)", True
        if held(identity)[0]:
            return False, "the path holds the stream even uncompressed (see buffering)", False
        lumped, shown = held(gzipped)
        extra = None
        if canary and identity.hop_delays and gzipped.hop_delays:
            extra = percentile(gzipped.hop_delays, 50) - percentile(identity.hop_delays, 50)
        late = extra is not None and extra >= HELD_INTERVALS * _interval()
        observed = (f"{encoding}-encoded: {shown}; TTFT {ms(gzipped.ttft_s)} "
                    f"(uncompressed {ms(identity.ttft_s)})")
        if extra is not None:
            observed += f"; each event {ms(extra)} later than uncompressed (median)"
        return lumped or late, observed, True

    async def observe(self, ctx: Context, hop: int) -> Observation:
        identity = await measure(ctx, hop, gzip=False)
        gzipped = await measure(ctx, hop, gzip=True)
        fault, observed, told = self.judge(identity, gzipped, ctx.path.origin == "streamlab")
        numbers: dict[str, Any] = {"gzip": brief(gzipped)}
        if not told:
            return Observation(self.name, self.kind, False, f"not measured: {observed}",
                               skipped=observed, measurements=numbers)
        evidence = f"with Accept-Encoding: gzip the path answered {observed}"
        return Observation(self.name, self.kind, fault, observed, evidence if fault else "",
                           measurements=numbers,
                           reason=None if ctx.path.origin == "streamlab" else PLAIN_REASON)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        identity = await measure(ctx, hop, gzip=False)
        gzipped = await measure(ctx, hop, gzip=True)
        return self.judge(identity, gzipped, ctx.path.origin == "streamlab")[0]


def flow_checks() -> list[Any]:
    return [Buffering(), Coalescing(), Compression()]


def not_for_plain(kind: FindingKind, name: str) -> Observation:
    return skipped(name, kind, "needs a canary origin (the lab's server: python -m server "
                               "--engine synthetic) behind the path")
