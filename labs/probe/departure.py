"""What a departure costs: the client leaves, and the origin's own record says when it noticed.

The probe sends a request id (`X-Request-Id`), reads three events (or gives up waiting for them
after a second, when a hop holds the stream), closes the connection, then reads
`GET /lab/requests/{id}` through the same entry: the tokens the engine made, and when (after the
request arrived) the server saw the client go. The server pauses one token after the departure,
because some proxies learn that the client left only when their next write to it fails: a path
that closes the upstream at once shows a delay of milliseconds; one that waits, the whole pause.
"""
from __future__ import annotations

import asyncio
from typing import Any

from labs import client
from labs.client.results import StreamResult
from labs.findings import Evidence, Pacing, Verdict, departure
from labs.findings.evidence import secs
from labs.probe import knobs
from labs.probe.base import CannotTell, Context, Observation, not_run, skipped
from labs.probe.path import entry_root

LEAVE_BY_S = 1.0  # leave at the latest this long after the request, events or not
RECORD_POLL_S = 0.1


def judge_departure(result: StreamResult, delay_s: float | None, pause_s: float) -> Verdict:
    """`delay_s`: how long after the client left the origin saw it go (None: never)."""
    return departure.judge(Evidence([result], Pacing(0.0, 1.0 / knobs.LEAVE_TOKENS_PER_S),
                                    silence_s=pause_s, release_s=delay_s))


def pause_for(ctx: Context) -> float:
    """The pause after the departure: below any idle limit found, which would end it early."""
    idle = ctx.notes.get("idle_limits_s") or []
    return min([knobs.LEAVE_PAUSE_S, *(0.5 * limit for limit in idle)])


class Disconnect:
    name, kind, canary_only = "disconnect-not-propagated", "disconnect-not-propagated", True

    async def observe(self, ctx: Context, hop: int) -> Observation:
        pause = pause_for(ctx)
        body = knobs.leave_body(ctx.path.model or "", pause, ctx.path.api)
        tokens = len(knobs.LEAVE_SCRIPT.split())
        stream_s = tokens / knobs.LEAVE_TOKENS_PER_S + pause
        if not ctx.budget.allows(stream_s + 2):
            return not_run(self.name, self.kind, f"the budget has {ctx.budget.left():.0f} s left")
        if not await ctx.path.records_readable(hop):
            where = f"{entry_root(ctx.path.urls[hop])}/lab/requests/"
            return not_run(self.name, self.kind, f"the origin's records are not readable through "
                                                 f"this entry ({where}): route /lab/ to the canary")
        request_id = ctx.path.new_request_id()
        ctx.progress(f"leaving a stream after {knobs.LEAVE_AFTER_EVENTS} events through "
                     f"{ctx.path.urls[hop]}")
        result = await client.measure_stream(
            ctx.path.completions(hop), body, headers=ctx.path.headers(request_id), **ctx.path.client_options(),
            accept_encoding=None, disconnect_after_events=knobs.LEAVE_AFTER_EVENTS,
            total_timeout_s=ctx.budget.cap(LEAVE_BY_S))
        if result.outcome not in ("disconnected", "timeout"):
            return skipped(self.name, self.kind, f"the stream ended before the client could leave "
                                                 f"({result.outcome}, {result.error or 'no error'})")
        left_at = result.disconnect_s if result.disconnect_s is not None else result.end_s or LEAVE_BY_S
        record = await self._finished_record(ctx, hop, request_id, stream_s + 3.0)
        if record is None:
            return skipped(self.name, self.kind, f"the origin kept no record of request {request_id}")
        received = result.content_events
        generated = int(record.get("tokens_generated") or 0)
        gone_after = record.get("client_gone_after_s")
        delay = None if gone_after is None else max(0.0, gone_after - left_at)
        numbers: dict[str, Any] = {
            "left_after_s": round(left_at, 3), "events_received": received, "pause_s": pause,
            "origin_saw_departure_after_s": delay, "tokens_generated": generated,
            "tokens_for_nobody": max(0, generated - received), "record": record}
        verdict = judge_departure(result, delay, pause)
        if not verdict.fault:
            return Observation(self.name, self.kind, False,
                               f"{verdict.observed} ({generated} tokens generated, {received} received)",
                               measurements=numbers, skipped=verdict.untold)
        if delay is None:
            seen = (f"the origin never saw it leave: it generated {generated} tokens "
                    f"({max(0, generated - received)} for nobody) and ended the stream "
                    f"{secs(record.get('ended_after_s'))} after the request ({record.get('outcome')})")
        else:
            seen = (f"the origin saw it leave only {secs(delay)} later (it paused {pause:g} s one "
                    f"token after the departure; a path that closes the upstream at once shows "
                    f"milliseconds), having generated {generated} tokens "
                    f"({max(0, generated - received)} for nobody)")
        evidence = f"the client left after {received} events at {secs(left_at)}; {seen}"
        return Observation(self.name, self.kind, True, verdict.observed, evidence, measurements=numbers)

    async def _finished_record(self, ctx: Context, hop: int, request_id: str,
                               wait_s: float) -> dict[str, Any] | None:
        """Poll the origin's record until the request is over (or `wait_s` has passed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ctx.budget.cap(wait_s)
        while True:
            record = await ctx.path.record(hop, request_id)
            if record is not None and record.get("finished"):
                return record
            if loop.time() >= deadline:
                return record
            await asyncio.sleep(RECORD_POLL_S)  # poll interval: the origin ends the stream itself

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        seen = await self.observe(ctx, hop)
        if seen.skipped:  # e.g. the records are not readable through that entry
            raise CannotTell(seen.skipped)
        return seen.fault
