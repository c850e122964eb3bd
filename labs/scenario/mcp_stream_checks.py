"""Checks on an MCP run's streams (labs/scenario/mcp_model.py): the standalone GET stream's life
(how many times the replica saw it opened, and when) and the server notifications the origin
recorded as sent against those the official client received. Progress notifications are judged
in lumps by arrival. Each proves its precondition: a cut is the replica seeing the client reopen its GET at the proxy's idle limit plus the client's own
reconnect delay; a lost notification is one the origin recorded sending."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labs.client.durations import milliseconds
from labs.findings.buffering import LUMP_GAP_SHARE
from labs.findings.coalescing import COALESCED_EVENTS_PER_READ
from labs.scenario.mcp_model import McpCheck, McpRun
from server.mcp.knobs import SENT_BY_SERVER

if TYPE_CHECKING:  # the SDK is imported where a session runs, not by the catalogue
    from labs.client.mcp_session import McpCall

# mcp 2.3's client reopens a cut GET stream after this (DEFAULT_RECONNECTION_DELAY_MS, with no
# `retry:` from the server) and gives up after MAX_RECONNECTION_ATTEMPTS failures in a row
# (mcp/client/streamable_http.py `handle_get_stream`). The TypeScript SDK's waits the same 1 s
# (initialReconnectionDelay 1000 x 1.5 ** attempt, and the attempt counts from 0 again after every
# reopening that was answered: sdk 1.32.2 dist/esm/client/streamableHttp.js `_handleSseStream`),
# so it never gives up on a stream that is cut after it opened.
CLIENT_RECONNECT_DELAY_S = 1.0
CLIENT_GIVES_UP_AFTER = 2
# What the TypeScript SDK reports to `onerror` for a cut stream, whoever cut it (undici's reason,
# e.g. its BodyTimeoutError, is lost in the SDK's `${error}`).
DISCONNECTED = "SSE stream disconnected"
# Timers round: HAProxy and nginx count whole milliseconds from their own clocks, the replica's
# record from the moment it sent the headers (a reopening measured 2.01 s against 2 s due).
TIMER_SLACK_S = 0.05


def _gets(run: McpRun) -> list[dict[str, Any]]:
    return [r for r in run.requests if r["http_method"] == "GET" and r["status"] == 200]


def _sent(run: McpRun) -> list[dict[str, Any]]:
    return [r for r in run.requests if r["http_method"] == SENT_BY_SERVER]


def _received(run: McpRun) -> list[tuple[str, float]]:
    return [notice for session in run.sessions for notice in session.notifications]


def _gaps(records: list[dict[str, Any]]) -> list[float]:
    return [later["at"] - earlier["at"] for earlier, later in zip(records, records[1:])]


def get_stream_cut_then_abandoned(idle_limit_s: float) -> McpCheck:
    """The replica saw the GET stream opened CLIENT_GIVES_UP_AFTER times, each reopening at least one
    idle limit plus the client's delay after the last (not cut before the proxy's limit), and never
    again for the rest of the idle session: the client stopped listening, with no error to its user.
    No upper bound: the proxies cut at the limit (nginx's access log: 1.001 s), but through nginx
    the 2.3 client noticed the first cut 0.9-4.7 s late, the second at once (docs/mcp.md)."""
    due = idle_limit_s + CLIENT_RECONNECT_DELAY_S

    def measure(run: McpRun) -> tuple[str, bool]:
        gaps = _gaps(_gets(run))
        errors = sorted({session.error for session in run.sessions if session.error})
        return (f"{len(gaps) + 1 if _gets(run) else 0} GET streams opened, reopened after "
                f"{[round(gap, 2) for gap in gaps]} s (due {due:g} s); client errors: {errors}",
                len(gaps) + 1 == CLIENT_GIVES_UP_AFTER and all(gap >= due - TIMER_SLACK_S for gap in gaps)
                and not errors)
    return McpCheck(f"the GET stream is cut at the {idle_limit_s:g} s idle limit, reopened once, then abandoned "
                    f"silently", measure)


def get_stream_held(idle_limit_s: float, limits: int = 3) -> McpCheck:
    """One GET stream for the whole session, which outlived `limits` times the idle limit that
    would have cut a silent one (the precondition: the session was idle that long)."""
    def measure(run: McpRun) -> tuple[str, bool]:
        idle = min((session.elapsed_s for session in run.sessions), default=0.0)
        return (f"{len(_gets(run))} GET streams opened over sessions of {idle:.1f} s (the idle limit "
                f"{idle_limit_s:g} s)", len(_gets(run)) == len(run.sessions) > 0 and idle >= limits * idle_limit_s)
    return McpCheck(f"one GET stream lived through more than {limits} idle limits", measure)


def get_stream_reopened_at_each_cut(cut_after_s: float, opens: int, late_s: float = 1.0) -> McpCheck:
    """The TypeScript SDK's client: the replica saw the GET stream opened at least `opens` times,
    each reopening one cut (`cut_after_s` after the last opened) plus the client's delay later, at
    most `late_s` past it (it kept listening, it did not give up as the Python client does); the
    SDK reported each cut to `onerror` and raised nothing."""
    due = cut_after_s + CLIENT_RECONNECT_DELAY_S

    def measure(run: McpRun) -> tuple[str, bool]:
        gaps = _gaps(_gets(run))
        cuts = [message for session in run.sessions for message, _ in session.logged if DISCONNECTED in message]
        errors = sorted({session.error for session in run.sessions if session.error})
        return (f"{len(_gets(run))} GET streams opened, reopened after {[round(gap, 2) for gap in gaps]} s "
                f"(due {due:g} s); {len(cuts)} cuts reported to onerror ({sorted(set(cuts))}); client errors: {errors}",
                len(gaps) + 1 >= opens and all(due - TIMER_SLACK_S <= gap <= due + late_s for gap in gaps)
                and len(cuts) >= len(gaps) and not errors)
    return McpCheck(f"the GET stream is cut {cut_after_s:g} s after each opening and reopened "
                    f"{CLIENT_RECONNECT_DELAY_S:g} s later, every time", measure)


def notification_lost(idle_limit_s: float) -> McpCheck:
    """The origin sent its server notification while no GET stream was open (one idle limit after
    the last one opened before it: cut, and for the Python client abandoned, for the TypeScript
    client not reopened yet), the client received none, and its tool calls still completed
    (nothing told its user)."""
    def measure(run: McpRun) -> tuple[str, bool]:
        sent, gets = _sent(run), _gets(run)
        down = [r for r in sent if any(g["at"] <= r["at"] for g in gets)
                and r["at"] > max(g["at"] for g in gets if g["at"] <= r["at"]) + idle_limit_s]
        done = sum(session.completed for session in run.sessions)
        return (f"the origin sent {len(sent)} server notifications ({len(down)} while the GET stream was cut), "
                f"the client received {len(_received(run))}; {done}/{len(run.sessions)} sessions completed",
                bool(sent) and len(down) == len(sent) and not _received(run) and done == len(run.sessions))
    return McpCheck("a server notification sent while the GET stream is cut is lost; the tool calls still work",
                    measure)


def notifications_received() -> McpCheck:
    def measure(run: McpRun) -> tuple[str, bool]:
        sent, received = _sent(run), _received(run)
        done = sum(session.completed for session in run.sessions)
        return (f"the origin sent {len(sent)} server notifications, the client received {len(received)} "
                f"({sorted({method for method, _ in received})}); {done}/{len(run.sessions)} sessions completed",
                bool(sent) and len(received) == len(sent) and done == len(run.sessions))
    return McpCheck("every server notification reaches the client", measure)


def _lumps(times: list[float], interval_s: float) -> int:
    """Progress notifications that arrived together, by the chat scenarios' buffering judge's rule:
    a new lump after a gap of LUMP_GAP_SHARE of the origin's interval (labs/findings/buffering.py).
    The SDK hands them over one by one and says nothing of socket reads, so arrival is all a
    check can read."""
    return 1 + sum(later - earlier >= LUMP_GAP_SHARE * interval_s for earlier, later in zip(times, times[1:])) \
        if times else 0


def _progress(run: McpRun, interval_s: float) -> tuple[list[McpCall], str]:
    calls = [call for session in run.sessions for call in session.calls]
    shown = "; ".join(f"{len(call.progress_at_s)} in {_lumps(call.progress_at_s, interval_s)} lumps, first "
                      f"{milliseconds(call.first_progress_s)}, result {milliseconds(call.elapsed_s)}"
                      for call in calls)
    return calls, shown


def paced_at_origin(call: McpCall, duration_s: float, interval_s: float) -> bool:
    """The precondition: the tool reported every step and worked its whole duration (the origin
    paced them; a burst made at once would say nothing about a hop)."""
    return len(call.progress_at_s) >= round(duration_s / interval_s) and (call.elapsed_s or 0.0) >= duration_s


def progress_in_lumps(duration_s: float, interval_s: float) -> McpCheck:
    """Every call's notifications, paced at the origin, arrived grouped: COALESCED_EVENTS_PER_READ
    or more per lump (the chat scenarios' coalescing bar), each call completing."""
    def measure(run: McpRun) -> tuple[str, bool]:
        calls, shown = _progress(run, interval_s)
        lumped = [call for call in calls if call.result is not None and paced_at_origin(call, duration_s, interval_s)
                  and len(call.progress_at_s) >= COALESCED_EVENTS_PER_READ * _lumps(call.progress_at_s, interval_s)]
        return shown, bool(calls) and len(lumped) == len(calls)
    return McpCheck(f"progress paced every {milliseconds(interval_s)} at the origin arrives in lumps", measure)


def progress_streams(duration_s: float, interval_s: float) -> McpCheck:
    """Every call's notifications, paced at the origin, arrived about one by one: fewer than
    COALESCED_EVENTS_PER_READ per lump (a loaded machine's client merges an odd pair: 20 in 19)."""
    def measure(run: McpRun) -> tuple[str, bool]:
        calls, shown = _progress(run, interval_s)
        streamed = [call for call in calls if call.result is not None and paced_at_origin(call, duration_s, interval_s)
                    and len(call.progress_at_s) < COALESCED_EVENTS_PER_READ * _lumps(call.progress_at_s, interval_s)]
        return shown, bool(calls) and len(streamed) == len(calls)
    return McpCheck(f"progress arrives notification by notification, every {milliseconds(interval_s)}", measure)


# mcp-held-headers: the lone GET's headers came with its first body byte, within this (the probe's).
HELD_WITH_BYTE_S = 0.05


def _lone_get(run: McpRun) -> tuple[Any, dict[str, Any] | None]:
    """(the lone GET as the client read it, the origin's record of that GET) or (None, None)."""
    stream = run.lone_gets[-1] if run.lone_gets else None
    if stream is None:
        return None, None
    return stream, next((r for r in run.requests if r["http_method"] == "GET" and r["session"] == stream.session), None)


def _lone_get_seen(stream: Any, origin: dict[str, Any] | None) -> str:
    if stream is None or origin is None:
        return "no lone GET stream read, or the origin recorded none"
    sent = "no body byte" if origin["body_at"] is None else f"its first body byte {milliseconds(origin['body_at'] - origin['at'])} later"
    return (f"the origin sent the GET's headers and {sent}; the client ({stream.http_version or 'no HTTP'}) got "
            f"HTTP {stream.status} after {milliseconds(stream.headers_s)}, its first body byte after "
            f"{milliseconds(stream.first_byte_s)}")


def get_headers_held(silence_s: float) -> McpCheck:
    """Over HTTP/2 the lone GET's headers came only with its first body byte, at least half the
    origin's silence late; the precondition: the origin did send its headers first and no byte for
    most of the silence (its record), so a hop held them."""

    def measure(run: McpRun) -> tuple[str, bool]:
        stream, origin = _lone_get(run)
        silent = origin is not None and origin["body_at"] is not None and \
            origin["body_at"] - origin["at"] >= 0.9 * silence_s
        held = stream is not None and stream.http_version == "HTTP/2" and stream.headers_s is not None \
            and stream.first_byte_s is not None and stream.headers_s >= 0.5 * silence_s \
            and stream.first_byte_s - stream.headers_s <= HELD_WITH_BYTE_S
        return _lone_get_seen(stream, origin), silent and held
    return McpCheck(f"over HTTP/2 the GET stream's headers wait for its first body byte ({silence_s:g} s of "
                    f"silence at the origin, which sent its headers at once)", measure)


def get_headers_prompt(silence_s: float, opened_with_comment: bool = False) -> McpCheck:
    """Over HTTP/2 the lone GET's 200 came within a quarter of the silence; `opened_with_comment`: the
    precondition of the fix, the origin's first body byte left with its headers (the comment)."""

    def measure(run: McpRun) -> tuple[str, bool]:
        stream, origin = _lone_get(run)
        prompt = stream is not None and stream.http_version == "HTTP/2" and stream.status == 200 \
            and stream.headers_s is not None and stream.headers_s < 0.25 * silence_s
        commented = origin is not None and origin["body_at"] is not None and \
            origin["body_at"] - origin["at"] < 0.25 * silence_s
        return _lone_get_seen(stream, origin), prompt and (commented or not opened_with_comment)
    what = "the origin's first comment left with its headers and " if opened_with_comment else ""
    return McpCheck(f"{what}over HTTP/2 the GET stream's 200 arrives at once (within {0.25 * silence_s:g} s)", measure)
