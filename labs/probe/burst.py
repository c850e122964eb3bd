"""Many streams at once: does the path refuse, reset or queue streams beyond a count?

`--streams N` streams of about a second each start together. Any that is refused (an HTTP error,
a reset, a cut) shows a limit; so does a wave of first tokens, where late streams wait about a
whole stream for an earlier one to end. The canary's own queue must not pass for the path's: each
stream carries a request id, and its record says when the origin itself sent the first token, so
only the wait in front of the origin counts. Without readable records the count is kept to the
canary's slots (its /healthz) so that the origin never queues.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from statistics import median
from typing import Any

from labs import client
from labs.client.results import StreamResult
from labs.probe import knobs
from labs.probe.base import Context, Observation, ms, skipped, spent

WAVE_SHARE = 0.8  # a wave: the last first token waits >= 80 % of a stream (labs.scenario.checks.many)
STREAM_TIMEOUT_S = 30.0


class ConnectionLimit:
    name, kind, canary_only = "connection-limit", "connection-limit", True

    async def _burst(self, ctx: Context, hop: int, n: int) -> tuple[list[StreamResult], list[str]]:
        ids = [ctx.path.new_request_id() for _ in range(n)]
        body = knobs.burst_body(ctx.path.model or "")
        ctx.progress(f"{n} concurrent streams through {ctx.path.urls[hop]}")
        results = await asyncio.gather(*(client.measure_stream(
            ctx.path.completions(hop), body, headers=ctx.path.headers(rid), accept_encoding=None,
            total_timeout_s=ctx.budget.cap(STREAM_TIMEOUT_S)) for rid in ids))
        return list(results), ids

    async def _origin_first_tokens(self, ctx: Context, hop: int, ids: list[str]) -> list[float | None]:
        records = await asyncio.gather(*(ctx.path.record(hop, rid) for rid in ids))
        return [None if r is None else r.get("first_token_after_s") for r in records]

    async def observe(self, ctx: Context, hop: int) -> Observation:
        n = ctx.settings.streams
        note = ""
        readable = await ctx.path.records_readable(hop)
        if not readable and ctx.path.slots and n > ctx.path.slots:
            n, note = ctx.path.slots, f" (kept to the canary's {ctx.path.slots} slots)"
        if n < 2:
            return skipped(self.name, self.kind, "needs at least 2 streams (--streams)")
        if not ctx.budget.allows(STREAM_TIMEOUT_S / 3):
            return skipped(self.name, self.kind, f"the budget has {ctx.budget.left():.0f} s left")
        results, ids = await self._burst(ctx, hop, n)
        for result in results:
            spent(ctx, result)
        origin = await self._origin_first_tokens(ctx, hop, ids)
        return self.judge(results, origin, note)

    def judge(self, results: list[StreamResult], origin: list[float | None], note: str) -> Observation:
        n = len(results)
        outcomes = Counter(r.outcome for r in results)
        statuses = Counter(str(r.status) for r in results if r.outcome == "http-error")
        numbers: dict[str, Any] = {"streams": n, "outcomes": dict(outcomes), "http_errors": dict(statuses)}
        failed = n - outcomes.get("complete", 0)
        if failed:
            shown = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            listed = ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items()))
            codes = f" (HTTP {listed})" if statuses else ""
            evidence = (f"of {n} concurrent streams{note}, {failed} did not complete: {shown}{codes}")
            return Observation(self.name, self.kind, True, f"{failed} of {n} streams failed{codes}",
                               evidence, measurements=numbers)
        # The wait in front of the origin: the client's TTFT less the origin's own first token.
        known = all(o is not None for o in origin)
        waits = [r.ttft_s - (o if known and o is not None else 0.0) for r, o in zip(results, origin)
                 if r.ttft_s is not None]
        lengths = [r.e2e_s - r.ttft_s for r in results if r.e2e_s is not None and r.ttft_s is not None]
        stream_s = median(lengths) if lengths else None
        numbers.update(wait_min_s=min(waits, default=None), wait_max_s=max(waits, default=None),
                       stream_s=stream_s, origin_first_token_known=known)
        spread = max(waits) - min(waits) if waits else 0.0
        basis = "in front of the origin" if known else "(TTFT; the origin's records were not readable)"
        observed = (f"{n} streams{note} complete; first-token wait {basis} "
                    f"{ms(min(waits, default=None))}..{ms(max(waits, default=None))}")
        if stream_s and spread >= WAVE_SHARE * stream_s:
            evidence = (f"all {n} concurrent streams{note} completed, but their first tokens came "
                        f"in waves: the last waited {ms(spread)} longer than the first {basis}, "
                        f"about a whole stream ({ms(stream_s)}): streams beyond a count are queued")
            return Observation(self.name, self.kind, True, observed, evidence, measurements=numbers)
        return Observation(self.name, self.kind, False, observed, measurements=numbers)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        return (await self.observe(ctx, hop)).fault
