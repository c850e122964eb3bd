"""Does the stream flow? Buffering, coalescing and compression, on one stamped stream.

The canary sends the catalogue's own workload (one event per token, ten a second, each stamped
with its send time); its pace is the baseline the judges (`labs.findings`) read the stream
against. Another origin gets an ordinary request, whose pace the probe can only guess: a judge
then names a fault only as a warning.
"""
from __future__ import annotations

from typing import Any

from labs import client
from labs.client.results import StreamResult
from labs.findings import (Evidence, FindingKind, Pacing, UnusableInput, Verdict, buffering, coalescing,
                           compression)
from labs.findings.evidence import ended, hop_spread_p50
from labs.probe import knobs
from labs.probe.base import Context, Observation, brief, skipped, spent, told

GZIP = "gzip, deflate"  # what httpx (and so the OpenAI SDK) sends
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
                                f"({ended(result)}{detail}); nothing else can be judged")
        ctx.notes[key] = result
    return ctx.notes[key]


def pacing(canary: bool) -> Pacing:
    """The canary's workload is the baseline; another origin's pace is only assumed to be it."""
    w = knobs.STREAM_WORKLOAD
    return Pacing(w.first_due_s(), w.interval_s, known=canary)


def _interval() -> float:
    return knobs.STREAM_WORKLOAD.interval_s


def judge_buffering(result: StreamResult, canary: bool) -> Verdict:
    return buffering.judge(Evidence([result], pacing(canary)))


def judge_coalescing(result: StreamResult) -> Verdict:
    return coalescing.judge(Evidence([result], pacing(True)))


def judge_compression(identity: StreamResult, gzipped: StreamResult, canary: bool) -> Verdict:
    return compression.judge(Evidence([gzipped], pacing(canary), reference=identity))


def _canary(ctx: Context) -> bool:
    return ctx.path.origin == "streamlab"


class Buffering:
    name, kind, canary_only = "buffering", "buffering", False

    async def observe(self, ctx: Context, hop: int) -> Observation:
        result = await measure(ctx, hop, gzip=False)
        verdict = judge_buffering(result, _canary(ctx))
        if _canary(ctx):
            evidence = (f"{verdict.observed} (the origin sent {result.content_events} events "
                        f"{_interval() * 1000:.0f} ms apart, one per write)")
        else:
            evidence = verdict.observed
        return Observation(self.name, self.kind, verdict.fault, verdict.observed,
                           evidence if verdict.fault else "", measurements={"identity": brief(result)},
                           skipped=verdict.untold, reason=verdict.unsure)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        return told(judge_buffering(await measure(ctx, hop, gzip=False), _canary(ctx))).fault


class Coalescing:
    name, kind, canary_only = "coalescing", "coalescing", True

    async def observe(self, ctx: Context, hop: int) -> Observation:
        result = await measure(ctx, hop, gzip=False)
        verdict = judge_coalescing(result)
        evidence = (f"{verdict.observed}: a hop grouped events the origin wrote one by one "
                    f"{_interval() * 1000:.0f} ms apart")
        return Observation(self.name, self.kind, verdict.fault, verdict.observed,
                           evidence if verdict.fault else "", skipped=verdict.untold,
                           measurements={"hop_delay_spread_p50_s": hop_spread_p50(result)})

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        return told(judge_coalescing(await measure(ctx, hop, gzip=False))).fault


class Compression:
    name, kind, canary_only = "compression-delay", "compression-delay", False

    async def _verdict(self, ctx: Context, hop: int) -> tuple[Verdict, StreamResult]:
        identity = await measure(ctx, hop, gzip=False)
        gzipped = await measure(ctx, hop, gzip=True)
        return judge_compression(identity, gzipped, _canary(ctx)), gzipped

    async def observe(self, ctx: Context, hop: int) -> Observation:
        verdict, gzipped = await self._verdict(ctx, hop)
        numbers: dict[str, Any] = {"gzip": brief(gzipped)}
        if verdict.untold:
            return Observation(self.name, self.kind, False, verdict.observed, skipped=verdict.untold,
                               measurements=numbers)
        evidence = f"with Accept-Encoding: gzip the path answered {verdict.observed}"
        return Observation(self.name, self.kind, verdict.fault, verdict.observed,
                           evidence if verdict.fault else "", measurements=numbers,
                           reason=verdict.unsure)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        return told((await self._verdict(ctx, hop))[0]).fault


def flow_checks() -> list[Any]:
    return [Buffering(), Coalescing(), Compression()]


def not_for_plain(kind: FindingKind, name: str) -> Observation:
    return skipped(name, kind, "needs a canary origin (the lab's server: python -m server "
                               "--engine synthetic) behind the path")
