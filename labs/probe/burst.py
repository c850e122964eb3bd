"""Many streams at once: does the path refuse, reset or queue streams beyond a count?

`--streams N` streams of about a second each start together. Any that is refused (an HTTP error,
a reset, a cut) shows a limit; so does a wave of first tokens, where late streams wait about a
whole stream for an earlier one to end. The canary's own queue must not pass for the path's: each
stream carries a request id, and its record says when the origin itself sent the first token, so
only the wait in front of the origin counts. Without readable records the count is kept to the
canary's slots (its /healthz) so that the origin never queues. The verdict is
`labs.findings.connection_limit`'s.
"""
from __future__ import annotations

import asyncio
from typing import Any

from labs import client
from labs.client.results import StreamResult
from labs.findings import connection_limit
from labs.probe import knobs
from labs.probe.base import CannotTell, Context, Observation, not_run, skipped, spent

STREAM_TIMEOUT_S = 30.0


class ConnectionLimit:
    name, kind, canary_only = "connection-limit", "connection-limit", True

    async def _burst(self, ctx: Context, hop: int, n: int) -> tuple[list[StreamResult], list[str]]:
        ids = [ctx.path.new_request_id() for _ in range(n)]
        body = knobs.burst_body(ctx.path.model or "", ctx.path.api)
        ctx.progress(f"{n} concurrent streams through {ctx.path.urls[hop]}")
        results = await asyncio.gather(*(client.measure_stream(
            ctx.path.completions(hop), body, headers=ctx.path.headers(rid), accept_encoding=None,
            **ctx.path.client_options(), total_timeout_s=ctx.budget.cap(STREAM_TIMEOUT_S)) for rid in ids))
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
            return not_run(self.name, self.kind, "needs at least 2 streams (--streams)")
        if not ctx.budget.allows(STREAM_TIMEOUT_S / 3):
            return not_run(self.name, self.kind, f"the budget has {ctx.budget.left():.0f} s left")
        results, ids = await self._burst(ctx, hop, n)
        for result in results:
            spent(ctx, result)
        origin = await self._origin_first_tokens(ctx, hop, ids)
        seen = self.observation(results, origin, note)
        if n < ctx.settings.streams and not seen.fault:
            # No limit up to n says nothing of one between n and the count asked for.
            seen.skipped = (f"only {n} of the {ctx.settings.streams} streams asked for ran{note} "
                            f"(the origin's records are not readable through this entry: route "
                            f"/lab/ to the canary, or give it more --slots); {seen.observed}")
            seen.observed = f"not measured: {seen.skipped}"
        return seen

    def observation(self, results: list[StreamResult], origin: list[float | None], note: str) -> Observation:
        burst = connection_limit.Burst.of(results, origin)
        verdict = connection_limit.judge_burst(burst)
        numbers: dict[str, Any] = {"streams": burst.streams, "outcomes": dict(burst.outcomes),
                                   "http_errors": dict(burst.statuses)}
        if not burst.failed:
            numbers.update(wait_min_s=burst.first_wait_s, wait_max_s=burst.last_wait_s,
                           stream_s=burst.stream_s, origin_first_token_known=burst.origin_known)
        evidence = f"of {burst.streams} concurrent streams{note}: {verdict.observed}"
        return Observation(self.name, self.kind, verdict.fault, f"{verdict.observed}{note}",
                           evidence if verdict.fault else "", measurements=numbers)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        seen = await self.observe(ctx, hop)
        if seen.skipped:
            raise CannotTell(seen.skipped)
        return seen.fault
