"""Does the stream flow? Buffering, coalescing and compression, on one stamped stream.

The canary sends the catalogue's own workload (one event per token, ten a second, each stamped
with its send time); its pace is the baseline the judges (`labs.findings`) read the stream
against. Another origin gets an ordinary request, whose pace the probe can only guess: a judge
then names a fault only as a warning.
"""
from __future__ import annotations

from typing import Any

from labs import client
from labs.client.durations import milliseconds
from labs.client.results import StreamResult
from labs.findings import (Evidence, FindingKind, Pacing, UnusableInput, Verdict, buffering, coalescing,
                           compression)
from labs.findings.evidence import ended, hop_spread_p50
from labs.probe import knobs, protocols
from labs.probe.base import Context, Observation, brief, not_run, skipped, spent, told

GZIP = "gzip, deflate"  # what httpx (and so the OpenAI SDK) sends
STREAM_TIMEOUT_S = 60.0
FLOW_NEEDS_S = 5.0  # the stamped stream lasts about 2 s


async def measure(ctx: Context, hop: int, *, gzip: bool, http2: bool = False) -> StreamResult:
    """The stamped stream through entry `hop`, with or without Accept-Encoding, over HTTP/1.1 or
    HTTP/2 (cached per run). Over HTTP/1.1 a stream that does not complete makes the run unusable;
    over HTTP/2 it is kept, and its judges say it proved nothing. A plain stream grouped too soon
    to tell (coalescing.grouped_too_soon) is measured once more, and every judge reads the second."""
    key = ("flow", hop, gzip, http2)
    if key not in ctx.notes:
        result = await _stream(ctx, hop, gzip=gzip, http2=http2)
        if not gzip and result.outcome == "complete" and coalescing.grouped_too_soon(result, pacing(True)):
            ctx.progress("the events came grouped too soon to tell: one more stream")
            ctx.notes[("flow-grouped-too-soon", hop, http2)] = brief(result)
            result = await _stream(ctx, hop, gzip=gzip, http2=http2)
        if result.outcome != "complete" and not http2:
            detail = f": {result.error}" if result.error else ""
            if result.body_snippet:
                detail += f" {result.body_snippet[:300]!r}"
            raise UnusableInput(f"a short stream through {ctx.path.urls[hop]} did not complete "
                                f"({ended(result)}{detail}); nothing else can be judged")
        ctx.notes[key] = result
    return ctx.notes[key]


async def _stream(ctx: Context, hop: int, *, gzip: bool, http2: bool) -> StreamResult:
    over = " over HTTP/2" if http2 else ""
    ctx.progress(f"stream through {ctx.path.urls[hop]}{over} "
                 f"({'Accept-Encoding: gzip' if gzip else 'no Accept-Encoding'})")
    ctx.budget.need(FLOW_NEEDS_S, "a short stream")
    model = ctx.path.model or ""
    api = ctx.path.api
    body = knobs.stream_body(model, api) if ctx.path.origin == "streamlab" else knobs.plain_body(model, api)
    result = await client.measure_stream(
        ctx.path.completions(hop), body,
        headers=ctx.path.headers(), **ctx.path.client_options(), accept_encoding=GZIP if gzip else None,
        http2=http2, total_timeout_s=ctx.budget.cap(STREAM_TIMEOUT_S))
    spent(ctx, result)
    return result


async def over_h2(ctx: Context, hop: int) -> StreamResult | None:
    """The same stamped stream over HTTP/2, where entry `hop` offers it (else None)."""
    return await measure(ctx, hop, gzip=False, http2=True) if await protocols.offers_h2(ctx, hop) else None


def pacing(canary: bool) -> Pacing:
    """The canary's pace is the baseline; another origin's pace is only assumed to be it."""
    return Pacing(0.0, knobs.STREAM_INTERVAL_S, known=canary)


def judge_buffering(result: StreamResult, canary: bool) -> Verdict:
    return buffering.judge(Evidence([result], pacing(canary)))


def judge_coalescing(result: StreamResult) -> Verdict:
    return coalescing.judge(Evidence([result], pacing(True)))


def judge_compression(identity: StreamResult, gzipped: StreamResult, canary: bool) -> Verdict:
    return compression.judge(Evidence([gzipped], pacing(canary), reference=identity))


def _canary(ctx: Context) -> bool:
    return ctx.path.origin == "streamlab"


class StreamCheck:
    """A check read on the stamped stream, over HTTP/1.1 and, where the entry offers it, HTTP/2."""

    name: str
    kind: FindingKind

    def judge(self, ctx: Context, result: StreamResult) -> Verdict:
        raise NotImplementedError

    def evidence(self, ctx: Context, observed: str, h1: StreamResult) -> str:
        return observed

    async def verdicts(self, ctx: Context, hop: int) -> tuple[Verdict, StreamResult, dict[str, Any]]:
        """(the verdict over both protocols, the HTTP/1.1 stream, the numbers: `only_over` says
        when the fault shows over HTTP/2 alone)."""
        h1 = await measure(ctx, hop, gzip=False)
        h2 = await over_h2(ctx, hop)
        numbers: dict[str, Any] = {"identity": brief(h1)}
        if h2 is not None:
            numbers["identity_h2"] = brief(h2)
        h2_told = None if h2 is None else protocols.h2_verdict(h2, self.judge(ctx, h2))
        verdict, h2_only = protocols.fold(self.judge(ctx, h1), h2_told)
        if h2_only:
            numbers["only_over"] = protocols.H2_ONLY
        return verdict, h1, numbers

    async def observe(self, ctx: Context, hop: int) -> Observation:
        verdict, h1, numbers = await self.verdicts(ctx, hop)
        evidence = self.evidence(ctx, verdict.observed, h1) if verdict.fault else ""
        return Observation(self.name, self.kind, verdict.fault, verdict.observed, evidence,
                           measurements=numbers, skipped=verdict.untold, reason=verdict.unsure)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        if first.measurements.get("only_over") == protocols.H2_ONLY:
            # Shown over HTTP/2 alone: an entry that does not offer it cannot be behind the fault.
            h2 = await over_h2(ctx, hop)
            return h2 is not None and told(protocols.h2_verdict(h2, self.judge(ctx, h2))).fault
        return told(self.judge(ctx, await measure(ctx, hop, gzip=False))).fault


class Buffering(StreamCheck):
    name, kind, canary_only = "buffering", "buffering", False

    def judge(self, ctx: Context, result: StreamResult) -> Verdict:
        return judge_buffering(result, _canary(ctx))

    def evidence(self, ctx: Context, observed: str, h1: StreamResult) -> str:
        if not _canary(ctx):
            return observed
        return (f"{observed} (the origin sent {h1.content_events} events "
                f"{milliseconds(knobs.STREAM_INTERVAL_S)} apart, one per write)")


class Coalescing(StreamCheck):
    name, kind, canary_only = "coalescing", "coalescing", True

    def judge(self, ctx: Context, result: StreamResult) -> Verdict:
        return judge_coalescing(result)

    def evidence(self, ctx: Context, observed: str, h1: StreamResult) -> str:
        return (f"{observed}: a hop grouped events the origin wrote one by one "
                f"{milliseconds(knobs.STREAM_INTERVAL_S)} apart")

    async def observe(self, ctx: Context, hop: int) -> Observation:
        seen = await super().observe(ctx, hop)
        h1 = await measure(ctx, hop, gzip=False)  # cached: the stream just judged
        seen.measurements["hop_delay_spread_p50_s"] = hop_spread_p50(h1)
        first = ctx.notes.get(("flow-grouped-too-soon", hop, False))
        if first is not None:  # the stream judged is the second: the first proved neither way
            seen.measurements["grouped_too_soon"] = first
        return seen


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


ROW_KEYS = ("http_version", "outcome", "ttft_s", "e2e_s", "content_events", "bursts",
            "events_per_read_mean", "events_per_read_max", "gap_p50_s", "gap_max_s")


def by_protocol(ctx: Context) -> list[dict[str, Any]]:
    """A row per protocol the outermost entry's stamped stream was measured over (two where
    HTTP/2 was compared), with what each streaming judge read on that protocol's stream."""
    rows = []
    judges: list[StreamCheck] = [Buffering(), *([Coalescing()] if _canary(ctx) else [])]
    for http2, label in ((False, "HTTP/1.1"), (True, "HTTP/2")):
        result = ctx.notes.get(("flow", 0, False, http2))
        if result is None:
            continue
        numbers = brief(result)
        row: dict[str, Any] = {"protocol": label, **{key: numbers[key] for key in ROW_KEYS}}
        for check in judges:
            verdict = check.judge(ctx, result)
            verdict = protocols.h2_verdict(result, verdict) if http2 else verdict
            row[check.name] = ("not measured" if verdict.untold else
                               "fault" if verdict.fault else "no fault")
        rows.append(row)
    return rows


def flow_checks() -> list[Any]:
    return [Buffering(), Coalescing(), Compression()]


def not_for_plain(kind: FindingKind, name: str) -> Observation:
    return not_run(name, kind, "needs a canary origin (the lab's server: python -m server "
                               "--engine synthetic) behind the path")
