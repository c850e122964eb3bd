"""Limits in time: how long a silence the path allows (and where), and how long a whole response.

An idle limit is found per position of the silence: before the response headers (a proxy answers
504), after them but before the first token, and in mid-stream (a 200 already sent, the stream is
cut). The first try is a silence of `--max-silence`; when it is cut, the moment of the cut is a
first estimate, and tries just under and over it (then bisection) bracket the limit to within
about 10 %. Heartbeats are off for these streams: a `: ping` resets every idle timer.

A total-duration limit is found with one stream longer than `--max-stream` that is never silent
(heartbeats every 0.25 s): when it is cut, the cut's time is the limit. It runs before the
silences, so a silence longer than the total limit is never mistaken for an idle limit.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from labs import client
from labs.client.results import StreamResult
from labs.findings import Evidence, Pacing, Verdict, idle_timeout, total_timeout
from labs.findings.evidence import ended, secs
from labs.probe import held_headers, knobs, protocols
from labs.probe.base import CannotTell, Context, Observation, OutOfBudget, not_run, skipped, spent, told

POSITIONS = ("before-headers", "after-headers", "mid-stream")
PLACE = {"before-headers": "before the response headers",
         "after-headers": "after the response headers, before the first token",
         "mid-stream": "in mid-stream"}
TOLERANCE = 0.10  # the bracket's half-width, as a share of the limit
MAX_TRIES = 8
# The client's own read timeout is this much longer than the silence: it must never be the limit.
CLIENT_SLACK_S = 5.0
SAME_LIMIT = 0.25  # an inner entry cut within 25 % of the limit shows the same limit


@dataclass
class Try:
    silence_s: float
    passed: bool
    ended: str
    cut_after_s: float | None  # seconds of silence when the path ended the stream
    untold: str | None = None  # why this try proved nothing (the silence did not happen...)
    held: dict | None = None  # cut with no status before it (held_headers.seen), after the headers


async def try_silence(ctx: Context, hop: int, position: str, silence_s: float, http2: bool = False) -> Try:
    over = " over HTTP/2" if http2 else ""
    ctx.progress(f"{silence_s:.2f} s of silence {PLACE[position]} through {ctx.path.urls[hop]}{over}")
    result = spent(ctx, await client.measure_stream(
        ctx.path.completions(hop), knobs.silence_body(ctx.path.model or "", position, silence_s, ctx.path.api),
        headers=ctx.path.headers(), accept_encoding=None, read_timeout_s=silence_s + CLIENT_SLACK_S,
        **{**ctx.path.client_options(), "http2": http2},
        total_timeout_s=ctx.budget.cap(silence_s + 2 * CLIENT_SLACK_S)))
    verdict = judge_try(result, silence_s)
    shown = (held_headers.seen(result, "HTTP/2" if http2 else "HTTP/1.1")
             if position == "after-headers" and held_headers.held(result) else None)
    return Try(round(silence_s, 3), not verdict.fault and not verdict.untold, ended(result),
               verdict.limit_s, verdict.untold, shown)


def judge_try(result: StreamResult, silence_s: float) -> Verdict:
    return idle_timeout.judge(Evidence([result], Pacing(0.0, 1.0 / knobs.SILENCE_TOKENS_PER_S),
                                       silence_s=silence_s))


def judge_long(result: StreamResult, duration_s: float) -> Verdict:
    """The long stream's bytes come every heartbeat: that is the pace a cut is read against."""
    return total_timeout.judge(Evidence([result], Pacing(0.0, knobs.LONG_HEARTBEAT_S),
                                        duration_s=duration_s))


def clearly_cut(limit_s: float, cut_from_s: float, longest_s: float) -> float:
    """A silence the limit cuts with room to spare, for a try that must see the cut again: the
    bracket's upper end can lie a millisecond over the limit (a try of 3.001 s cut by nginx's
    3 s in CI), and a loaded machine's timer lag lets a second try there pass."""
    return min(longest_s, max(cut_from_s, limit_s * (1 + TOLERANCE)))


def _bracketed(lo: float, hi: float) -> bool:
    return lo > 0 and (hi - lo) <= 2 * TOLERANCE * (hi + lo) / 2


class IdleTimeout:
    kind, canary_only = "idle-timeout", True

    def __init__(self, position: str) -> None:
        self.position = position
        self.name = f"idle-timeout-{position}"

    def longest(self, ctx: Context) -> float:
        """--max-silence, kept under a total limit found earlier (which would cut it first)."""
        longest = ctx.settings.max_silence_s
        total = ctx.notes.get("total_limit_s")
        return min(longest, 0.8 * total) if total else longest

    async def observe(self, ctx: Context, hop: int) -> Observation:
        longest = self.longest(ctx)
        if not ctx.budget.allows(longest + 1):
            return not_run(self.name, self.kind, f"the budget has {ctx.budget.left():.0f} s left, "
                                                 f"a silence of {longest:g} s does not fit")
        tries = [await try_silence(ctx, hop, self.position, longest)]
        if tries[0].untold:  # a silence that did not happen (or that the client left) proved nothing
            return Observation(self.name, self.kind, False, f"not measured: {tries[0].untold}",
                               measurements={"tries": [asdict(t) for t in tries]},
                               skipped=tries[0].untold)
        if tries[0].passed:
            total = ctx.notes.get("total_limit_s")
            capped = (f" (kept under the {total:.2f} s total limit)"
                      if total and longest < ctx.settings.max_silence_s else "")
            return Observation(self.name, self.kind, False,
                               f"a silence of {longest:.3g} s {PLACE[self.position]} passed{capped}",
                               measurements={"tries": [asdict(t) for t in tries]})
        first = tries[0]
        estimate = first.cut_after_s if first.cut_after_s and first.cut_after_s <= longest * 1.05 else None
        lo, hi = 0.0, longest
        queue = [estimate * (1 - TOLERANCE), estimate * (1 + TOLERANCE)] if estimate else []
        while len(tries) < MAX_TRIES and not _bracketed(lo, hi):
            silence = queue.pop(0) if queue else ((lo + hi) / 2 if lo else hi / 2)
            if not lo < silence < hi:
                continue
            if silence < 0.02 or not ctx.budget.allows(silence + 1):
                break
            try:
                attempt = await try_silence(ctx, hop, self.position, silence)
            except OutOfBudget:
                break  # report the bracket found so far
            tries.append(attempt)
            if attempt.untold:
                break  # that try proved nothing: report the bracket found so far
            if attempt.passed:
                lo = silence
            else:
                hi = silence
        limit = estimate if estimate is not None and lo <= estimate <= hi else (lo + hi) / 2
        ctx.notes.setdefault("idle_limits_s", []).append(limit)
        numbers: dict[str, Any] = {"tries": [asdict(t) for t in tries], "passed_up_to_s": lo or None,
                   "cut_from_s": hi}
        cut = min((t for t in tries if not t.passed and not t.untold), key=lambda t: t.silence_s)
        passed_text = f"{lo:.2f} s passed" if lo else "even the shortest silence tried was cut"
        evidence = (f"a silence of {cut.silence_s:.2f} s {PLACE[self.position]} ended the stream "
                    f"({cut.ended}; the client saw the end {secs(cut.cut_after_s)} after the "
                    f"silence began); {passed_text}: an idle limit of "
                    f"about {limit:.2f} s ({len(tries)} tries)")
        observed = f"idle limit ~{limit:.2f} s {PLACE[self.position]} ({cut.ended})"
        held = (await self.held(ctx, hop, cut, clearly_cut(limit, hi, longest))
                if self.position == "after-headers" else None)
        if held:
            numbers[held_headers.KEY] = held
            observed = f"headers held until the first body byte, then cut: {observed}"
            evidence = f"{evidence}; {held_headers.said(held)}"
        return Observation(self.name, self.kind, True, observed, evidence, limit_s=round(limit, 3),
                           measurements=numbers)

    async def held(self, ctx: Context, hop: int, cut: Try, silence_s: float) -> dict | None:
        """What showed the headers held: the HTTP/1.1 cut itself, else (on an entry that offers
        h2) one more try over HTTP/2 at a silence the limit clearly cuts; None when neither did."""
        if cut.held or not await protocols.offers_h2(ctx, hop) or not ctx.budget.allows(silence_s + 1):
            return cut.held
        return (await try_silence(ctx, hop, self.position, silence_s, http2=True)).held

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        cut_from = first.measurements.get("cut_from_s")
        if cut_from is None or first.limit_s is None:
            return False
        silence = clearly_cut(first.limit_s, cut_from, self.longest(ctx))
        # A cut far from the limit is asked once more: on a busy machine the client may see a
        # cut late (measured: once at load 6, which named the hop in front of the culprit).
        held = first.measurements.get(held_headers.KEY)
        http2 = held is not None and held["protocol"] == "HTTP/2"
        if http2 and not await protocols.offers_h2(ctx, hop):
            raise CannotTell("the headers were held over HTTP/2, and this entry does not offer it")
        for _ in range(2):
            attempt = await try_silence(ctx, hop, self.position, silence, http2=http2)
            if attempt.untold:
                raise CannotTell(attempt.untold)
            if attempt.passed or (held and not attempt.held):
                return False  # the hop that holds the headers is the one in front
            cut = attempt.cut_after_s
            if cut is None or abs(cut - first.limit_s) <= SAME_LIMIT * first.limit_s:
                return True
        return False


class TotalTimeout:
    name, kind, canary_only = "total-timeout", "total-timeout", True

    async def _long(self, ctx: Context, hop: int, duration_s: float) -> StreamResult:
        ctx.progress(f"a {duration_s:.1f} s stream (heartbeats on) through {ctx.path.urls[hop]}")
        return spent(ctx, await client.measure_stream(
            ctx.path.completions(hop), knobs.long_body(ctx.path.model or "", duration_s, ctx.path.api),
            headers=ctx.path.headers(), accept_encoding=None, read_timeout_s=CLIENT_SLACK_S,
            **ctx.path.client_options(), total_timeout_s=ctx.budget.cap(duration_s + 3 * CLIENT_SLACK_S)))

    async def observe(self, ctx: Context, hop: int) -> Observation:
        # A little past --max-stream, so a limit of exactly that length still shows.
        duration = ctx.settings.max_stream_s * 1.1 + 0.5
        if not ctx.budget.allows(duration + 1):
            return not_run(self.name, self.kind, f"the budget has {ctx.budget.left():.0f} s left, "
                                                 f"a {duration:.0f} s stream does not fit")
        result = await self._long(ctx, hop, duration)
        numbers = {"duration_s": round(duration, 3), "stream": {
            "outcome": result.outcome, "status": result.status, "end_s": result.end_s,
            "content_events": result.content_events, "heartbeats": result.heartbeats}}
        verdict = judge_long(result, duration)
        if not verdict.fault or verdict.limit_s is None:
            # A stream that ended too soon by itself, or went silent, proved nothing: skipped.
            return Observation(self.name, self.kind, False, verdict.observed, measurements=numbers,
                               skipped=verdict.untold)
        limit = verdict.limit_s
        ctx.notes["total_limit_s"] = limit
        evidence = (f"{verdict.observed}, heartbeats every {knobs.LONG_HEARTBEAT_S:g} s, "
                    f"{knobs.long_tokens(duration)} tokens asked: a limit on the whole response of "
                    f"about {limit:.2f} s")
        return Observation(self.name, self.kind, True, f"cut after {limit:.2f} s ({ended(result)})",
                           evidence, limit_s=limit, measurements=numbers)

    async def shows(self, ctx: Context, hop: int, first: Observation) -> bool:
        if first.limit_s is None:
            return False
        duration = first.limit_s * 1.5 + 0.5
        cut = told(judge_long(await self._long(ctx, hop, duration), duration)).limit_s
        return cut is not None and abs(cut - first.limit_s) <= SAME_LIMIT * first.limit_s


def time_checks() -> list[object]:
    return [TotalTimeout(), *(IdleTimeout(p) for p in POSITIONS)]
