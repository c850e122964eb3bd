"""Checks on an MCP run's streams (labs/scenario/mcp_model.py): the standalone GET stream's life
(how many times the replica saw it opened, and when) and the server notifications the origin
recorded as sent against those the official client received. Each proves its precondition: a cut
is the replica seeing the client reopen its GET at the proxy's idle limit plus the client's own
reconnect delay; a lost notification is one the origin recorded sending."""
from __future__ import annotations

from typing import Any

from labs.scenario.mcp_model import McpCheck, McpRun
from server.mcp.knobs import SENT_BY_SERVER

# mcp 2.3's client reopens a cut GET stream after this (DEFAULT_RECONNECTION_DELAY_MS, with no
# `retry:` from the server) and gives up after MAX_RECONNECTION_ATTEMPTS failures in a row
# (mcp/client/streamable_http.py `handle_get_stream`).
CLIENT_RECONNECT_DELAY_S = 1.0
CLIENT_GIVES_UP_AFTER = 2
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
    No upper bound: the proxies cut at the limit (nginx's access log: 1.001 s) but the 2.3 client
    noticed the first cut 1.2-3.5 s late in hand runs, the second at once (docs/mcp.md)."""
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


def notification_lost(idle_limit_s: float) -> McpCheck:
    """The origin sent its server notification after the last GET stream had been cut (one idle
    limit after it opened), the client received none, and its tool calls still completed
    (nothing told its user)."""
    def measure(run: McpRun) -> tuple[str, bool]:
        sent, gets = _sent(run), _gets(run)
        after = [r for r in sent if gets and r["at"] > gets[-1]["at"] + idle_limit_s]
        done = sum(session.completed for session in run.sessions)
        return (f"the origin sent {len(sent)} server notifications ({len(after)} after the last GET was cut), "
                f"the client received {len(_received(run))}; {done}/{len(run.sessions)} sessions completed",
                bool(sent) and len(after) == len(sent) and not _received(run) and done == len(run.sessions))
    return McpCheck("a server notification sent after that is lost; the tool calls still work", measure)


def notifications_received() -> McpCheck:
    def measure(run: McpRun) -> tuple[str, bool]:
        sent, received = _sent(run), _received(run)
        done = sum(session.completed for session in run.sessions)
        return (f"the origin sent {len(sent)} server notifications, the client received {len(received)} "
                f"({sorted({method for method, _ in received})}); {done}/{len(run.sessions)} sessions completed",
                bool(sent) and len(received) == len(sent) and done == len(run.sessions))
    return McpCheck("every server notification reaches the client", measure)
