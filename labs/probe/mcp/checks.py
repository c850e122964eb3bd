"""The three MCP checks: does a session survive, do progress notifications stream, how long does
the silent GET stream live (and are its headers held). Each measures through one entry
(`observe`) and says whether an inner entry still shows the same fault (`shows`, the hop
attribution of labs/probe/run.py).

A session lost to another replica and held GET headers are named faults of their own (no finding
kind of labs/findings declares them yet: `kind` is the fault's name and the report calls them
failures); lumped progress is the `buffering` judge's (the same decision: events held and let go
together), a cut GET stream the `idle-timeout` kind (a silence longer than a limit ends it).
"""
from __future__ import annotations

from dataclasses import asdict

from labs.client.mcp_session import McpResult
from labs.client.results import Event, StreamResult
from labs.findings import Evidence, Pacing, buffering
from labs.findings.evidence import secs
from labs.probe.base import CannotTell, Observation, not_run, skipped
from labs.probe.mcp.endpoint import McpContext
from labs.client.mcp_get_stream import GetStream, measure_get_stream
from labs.probe.mcp.names import CHECK_NAMES

NOT_FOUND = "Session not found"  # the official client's error for a server's 404 on a session
SESSION_TIMEOUT_S = 30.0
MIN_PROGRESS = 3  # fewer notifications cannot show whether they were spread or lumped
SAME_LIMIT = 0.25  # an inner entry cut within 25 % of the limit shows the same limit


def lost(session: McpResult) -> bool:
    """Opened with a session id, then a later request of it answered 404 / 'Session not found'."""
    later = [status for _, status, carried in session.responses[1:] if carried]
    return session.opened and session.session_id is not None and (
        NOT_FOUND in (session.error or "") or 404 in later)


def judge_sessions(sessions: list[McpResult], requests: int) -> tuple[bool, str, str | None]:
    """(fault, what was seen, why it proved nothing or None)."""
    opened = [s for s in sessions if s.opened]
    if not opened:
        return False, "", f"no session opened: {sorted({s.error or '?' for s in sessions})}"
    gone = [s for s in opened if lost(s)]
    if gone:
        statuses = gone[0].statuses
        return True, (f"{len(gone)} of {len(sessions)} sessions lost after initialize: a later request "
                      f"answered 404 '{NOT_FOUND}' (statuses {statuses}; the client: {gone[0].error}): the "
                      f"session was opened on one replica and a later request reached another "
                      f"(no affinity across replicas)"), None
    failed = [s for s in sessions if not s.completed]
    if failed:
        return False, "", f"{len(failed)} of {len(sessions)} sessions failed otherwise: {failed[0].error}"
    if all(s.session_id is None for s in opened):
        return False, (f"stateless (the server gave no Mcp-Session-Id): {len(sessions)} of "
                       f"{len(sessions)} sessions of {requests} requests each completed"), None
    return False, (f"{len(sessions)} of {len(sessions)} sessions kept their Mcp-Session-Id through "
                   f"initialize and {requests} requests each"), None


class SessionSurvives:
    name, kind = "session-survives", "session-affinity"

    async def _sessions(self, ctx: McpContext, hop: int) -> list[McpResult]:
        ctx.progress(f"{ctx.sessions} sessions of {ctx.calls} requests through {ctx.path.urls[hop]}")
        # tools/list: a request every server answers, with no side effect on a server not the lab's.
        return [await ctx.path.session(hop, calls=ctx.calls, timeout_s=ctx.budget.cap(SESSION_TIMEOUT_S))
                for _ in range(ctx.sessions)]

    async def observe(self, ctx: McpContext, hop: int) -> Observation:
        ctx.budget.need(2.0, "the sessions")
        sessions = await self._sessions(ctx, hop)
        fault, seen, untold = judge_sessions(sessions, ctx.calls)
        numbers = {"sessions": len(sessions), "lost": sum(lost(s) for s in sessions),
                   "completed": sum(s.completed for s in sessions),
                   "statuses": [s.statuses for s in sessions], "errors": [s.error for s in sessions]}
        if untold:
            return Observation(self.name, self.kind, False, f"not measured: {untold}", measurements=numbers,
                               skipped=untold)
        observed = seen.split(":")[0] if fault else seen
        return Observation(self.name, self.kind, fault, observed, seen if fault else "", measurements=numbers)

    async def shows(self, ctx: McpContext, hop: int, first: Observation) -> bool:
        fault, _, untold = judge_sessions(await self._sessions(ctx, hop), ctx.calls)
        if untold:
            raise CannotTell(untold)
        return fault


def progress_stream(times: list[float], elapsed_s: float) -> StreamResult:
    """The notifications as a stream the buffering judge reads: each one an event (the SDK hands
    them over one by one and says nothing of socket reads, so each is its own read: only the
    held-to-the-end shape, judged by arrival times, can show), ending at `elapsed_s`."""
    events = [Event(t=t, read=n + 1, kind="content") for n, t in enumerate(times)]
    return StreamResult(outcome="complete", status=200, ttft_s=times[0], e2e_s=elapsed_s, end_s=elapsed_s,
                        events=events, reads=len(events))


class ProgressStreams:
    name, kind = "progress-streams", "buffering"

    async def _call(self, ctx: McpContext, hop: int) -> tuple[McpResult, str | None]:
        tool = ctx.path.tool or ""
        ctx.progress(f"calling {tool} through {ctx.path.urls[hop]}")
        outcome = await ctx.path.session(hop, tool=tool, arguments=ctx.path.arguments,
                                         timeout_s=ctx.budget.cap(SESSION_TIMEOUT_S))
        call = outcome.calls[0] if outcome.calls else None
        if call is None or call.result is None:
            return outcome, f"the call to {tool} failed: {outcome.error or (call and call.error)}"
        if len(call.progress_at_s) < MIN_PROGRESS:
            return outcome, (f"{tool} reported {len(call.progress_at_s)} progress notifications (a JSON answer, "
                             f"or a tool that reports none): {MIN_PROGRESS} or more are needed")
        return outcome, None

    def judge(self, outcome: McpResult) -> tuple[bool, str]:
        call = outcome.calls[0]
        times = call.progress_at_s
        # The notifications' own stream ends at the last one (the result may come much later: the
        # 2.3 client's first call to a 1.30 server returned 5 s after its last notification), and
        # its pace is the tool's own, the time to the last notification over their count (the
        # probe cannot steer a tool as it steers the canary's tokens).
        pacing = Pacing(0.0, times[-1] / len(times))
        verdict = buffering.judge(Evidence([progress_stream(times, times[-1])], pacing))
        return verdict.fault, (f"{len(times)} notifications over {secs(times[-1])}, first after "
                               f"{secs(times[0])}, largest gap {secs(max(call.gaps_s, default=None))}: "
                               f"{verdict.observed}")

    async def observe(self, ctx: McpContext, hop: int) -> Observation:
        if not ctx.path.tool:
            return skipped(self.name, self.kind, f"no tool known to report progress (the server lists "
                                                 f"{', '.join(ctx.path.tools) or 'none'}): name one with "
                                                 f"--mcp-tool NAME [--mcp-args JSON]")
        ctx.budget.need(2.0, "a tool call")
        outcome, untold = await self._call(ctx, hop)
        numbers = {"tool": ctx.path.tool, "call": outcome.as_dict()["calls"][:1]}
        if untold:
            return Observation(self.name, self.kind, False, f"not measured: {untold}", measurements=numbers,
                               skipped=untold)
        fault, seen = self.judge(outcome)
        return Observation(self.name, self.kind, fault, seen, seen if fault else "", measurements=numbers)

    async def shows(self, ctx: McpContext, hop: int, first: Observation) -> bool:
        outcome, untold = await self._call(ctx, hop)
        if untold:
            raise CannotTell(untold)
        return self.judge(outcome)[0]


def describe(stream: GetStream) -> str:
    comments = (f"{len(stream.comments_at_s)} keep-alive comments, every {stream.comment_interval_s():.1f} s"
                if len(stream.comments_at_s) > 1 else
                f"{len(stream.comments_at_s)} keep-alive comment" + ("s" if not stream.comments_at_s else ""))
    headers = (f"headers held until the first body byte ({secs(stream.headers_s)})" if stream.held_headers
               else f"headers after {secs(stream.headers_s)}"
               + (f", first body byte after {secs(stream.first_byte_s)}" if stream.first_byte_s is not None
                  else ", no body byte"))
    end = (f"{stream.ended} after {secs(stream.end_s)} ({secs(stream.silent_for_s)} after its last byte)"
           if stream.cut else f"{stream.ended} ({stream.wait_s:g} s)")
    return f"{end}; {comments}; {headers}"


class SilentGetStream:
    name, kind = "get-stream", "idle-timeout"

    async def _stream(self, ctx: McpContext, hop: int, wait_s: float) -> GetStream:
        ctx.progress(f"holding the GET stream open up to {wait_s:g} s through {ctx.path.urls[hop]}")
        if ctx.path.session_id is None:  # a stateless server: does it speak 2026-07-28 (GET 405)?
            modern = await measure_get_stream(ctx.path.urls[hop], wait_s, headers=ctx.path.headers,
                                              verify_tls=ctx.path.verify_tls, stateless=True)
            if modern.status == 405 or ctx.path.mode == "modern":
                return modern
        # HTTP/2 where TLS offers it, as browsers and most clients negotiate: a hop holds the headers
        # only over HTTP/2 (mcp-held-headers); over http:// HTTP/1.1, as h2c is rarely served.
        return await measure_get_stream(ctx.path.urls[hop], wait_s, headers=ctx.path.headers,
                                        verify_tls=ctx.path.verify_tls,
                                        http2=ctx.path.urls[hop].startswith("https://"))

    async def observe(self, ctx: McpContext, hop: int) -> Observation:
        wait = ctx.settings.max_silence_s
        if not ctx.budget.allows(wait + 2):
            return not_run(self.name, self.kind, f"the budget has {ctx.budget.left():.0f} s left, "
                                                 f"a {wait:g} s GET stream does not fit")
        stream = await self._stream(ctx, hop, wait)
        numbers = asdict(stream)
        if stream.status == 405:
            # Not applicable rather than unmeasured: the run stays conclusive (`not_run`).
            return not_run(self.name, self.kind, "stateless server has no GET stream (405)")
        if stream.status != 200 and not stream.cut:
            return skipped(self.name, self.kind, f"the GET stream could not be opened: {stream.ended}")
        seen = describe(stream)
        if stream.cut:
            limit = stream.silent_for_s
            evidence = (f"the standalone GET stream, silent by design, was cut: {seen}: an idle limit of about "
                        f"{secs(limit)} on the path (keep-alive comments more often than that, or a longer limit)")
            return Observation(self.name, self.kind, True, f"cut at ~{secs(limit)}: {stream.ended}", evidence,
                               limit_s=None if limit is None else round(limit, 3), measurements=numbers)
        if stream.held_headers:
            evidence = (f"the GET stream's response headers came only with its first body byte, "
                        f"{secs(stream.headers_s)} after the request: a hop holds them (a client waiting for "
                        f"the 200 sees nothing until then): {seen}")
            return Observation(self.name, "held-headers", True, f"headers held {secs(stream.headers_s)}",
                               evidence, measurements=numbers)
        return Observation(self.name, self.kind, False, seen, measurements=numbers)

    async def shows(self, ctx: McpContext, hop: int, first: Observation) -> bool:
        if first.kind == "held-headers":
            return (await self._stream(ctx, hop, ctx.settings.max_silence_s)).held_headers
        if first.limit_s is None:
            return False
        stream = await self._stream(ctx, hop, min(ctx.settings.max_silence_s, first.limit_s * 1.5 + 1))
        cut = stream.silent_for_s
        return cut is not None and abs(cut - first.limit_s) <= SAME_LIMIT * max(first.limit_s, 0.1)


CHECKS = (SessionSurvives(), ProgressStreams(), SilentGetStream())
MCP_CHECK_NAMES: tuple[str, ...] = tuple(check.name for check in CHECKS)
assert MCP_CHECK_NAMES == CHECK_NAMES, "labs/probe/mcp/names.py names the checks in this order"
