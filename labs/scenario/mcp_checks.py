"""Checks on an MCP run (labs/scenario/mcp_model.py), each proving its own precondition: a symptom
is "session not found" *and* that another replica than the session's own answered it; a cure is
every session completing *and* where its requests went (one replica per session, or, stateless,
both replicas and still complete)."""
from __future__ import annotations

from labs.scenario.mcp_model import McpCheck, McpRun

NOT_FOUND = "Session not found"  # the SDK's client raises MCPError with the server's 404 text


def sessions_not_found() -> McpCheck:
    """Every session opened (initialize answered) and then failed with the SDK's "Session not
    found", before any tool call returned."""
    def measure(run: McpRun) -> tuple[str, bool]:
        errors = [session.error for session in run.sessions]
        opened = sum(session.opened for session in run.sessions)
        returned = sum(call.result is not None for session in run.sessions for call in session.calls)
        failed = sum(NOT_FOUND in (error or "") for error in errors)
        return (f"{opened}/{len(run.sessions)} opened, {failed} failed with '{NOT_FOUND}', {returned} tool "
                f"calls returned; errors: {sorted(set(filter(None, errors)))}",
                bool(run.sessions) and opened == failed == len(run.sessions) and returned == 0)
    return McpCheck("each session opens, then fails at its first tool call: 'Session not found'", measure)


def some_sessions_not_found() -> McpCheck:
    """A look-alike fix: still at least one session that opened and then got 'Session not found'."""
    def measure(run: McpRun) -> tuple[str, bool]:
        failed = sum(session.opened and NOT_FOUND in (session.error or "") for session in run.sessions)
        done = sum(session.completed for session in run.sessions)
        return f"{failed} of {len(run.sessions)} sessions failed with '{NOT_FOUND}', {done} completed", failed > 0
    return McpCheck(f"sessions still fail with '{NOT_FOUND}'", measure)


def sessions_refused_at_connect() -> McpCheck:
    """The TypeScript SDK's client: every session failed inside `Client.connect` with "Session not
    found" and never opened, no tool call sent: its transport throws the 404 on the `initialized`
    notification (dist/esm/client/streamableHttp.js `send`), which the Python client swallows."""
    def measure(run: McpRun) -> tuple[str, bool]:
        opened = sum(session.opened for session in run.sessions)
        calls = sum(len(session.calls) for session in run.sessions)
        failed = sum(NOT_FOUND in (session.error or "") for session in run.sessions)
        errors = sorted({session.error for session in run.sessions if session.error})
        return (f"{opened}/{len(run.sessions)} opened, {failed} failed with '{NOT_FOUND}', {calls} tool calls sent; "
                f"statuses {[session.statuses for session in run.sessions]}; errors: {errors}",
                bool(run.sessions) and failed == len(run.sessions) and opened == calls == 0)
    return McpCheck(f"each session fails while it connects: '{NOT_FOUND}' on the initialized notification",
                    measure)


def not_found_from_another_replica(method: str = "tools/call") -> McpCheck:
    """The 404s to `method` came from a replica other than the one that opened the session, and two
    replicas answered: round-robin really split each session."""
    def measure(run: McpRun) -> tuple[str, bool]:
        refused = [r for r in run.requests if r["status"] == 404 and r["method"] == method]
        elsewhere = [r for r in refused if r["replica"] != run.replica_of(r["session"])]
        answering = sorted({r["replica"] for r in run.requests})
        return (f"{len(elsewhere)} of {len(refused)} refused {method} on another replica than the "
                f"session's initialize; replicas that answered: {answering}; {run.counts()}",
                bool(refused) and len(elsewhere) == len(refused) and len(answering) >= 2)
    return McpCheck(f"the 404 to {method} came from the replica that does not hold the session", measure)


def sessions_complete() -> McpCheck:
    """Every session's every tool call returned, with progress notifications on the way, and no
    replica answered 404."""
    def measure(run: McpRun) -> tuple[str, bool]:
        done = sum(session.completed for session in run.sessions)
        calls = [call for session in run.sessions for call in session.calls]
        progressed = sum(bool(call.progress_at_s) for call in calls)
        refused = sum(r["status"] == 404 for r in run.requests)
        errors = sorted({session.error for session in run.sessions if session.error})
        return (f"{done}/{len(run.sessions)} sessions completed, {progressed}/{len(calls)} calls with progress, "
                f"{refused} requests answered 404; errors: {errors}",
                bool(run.sessions) and done == len(run.sessions) and progressed == len(calls) > 0 and refused == 0)
    return McpCheck("every session completes its tool calls, with progress notifications", measure)


def each_session_on_one_replica() -> McpCheck:
    def measure(run: McpRun) -> tuple[str, bool]:
        by_session: dict[str, set[int]] = {}
        for record in run.requests:
            if record["session"]:
                by_session.setdefault(record["session"], set()).add(record["replica"])
        split = [session for session, replicas in by_session.items() if len(replicas) > 1]
        return (f"{len(by_session)} sessions, {len(split)} reached more than one replica; {run.counts()}",
                len(by_session) == len(run.sessions) > 0 and not split)
    return McpCheck("every request of a session reached the replica that holds it", measure)


def requests_spread(replicas: int = 2, how: str = "with no session to keep") -> McpCheck:
    """The requests still reached several replicas (the fix is not that the balancer stopped
    balancing): stateless, round-robin as before; with affinity, the sessions spread, each kept."""
    def measure(run: McpRun) -> tuple[str, bool]:
        answering = sorted({r["replica"] for r in run.requests})
        return f"requests answered by replicas {answering}; {run.counts()}", len(answering) >= replicas
    return McpCheck(f"requests answered by {replicas} replicas, {how}", measure)


def one_replica_only() -> McpCheck:
    def measure(run: McpRun) -> tuple[str, bool]:
        answering = sorted({r["replica"] for r in run.requests})
        return f"replicas that answered: {answering}; {run.counts()}", answering == [0]
    return McpCheck("one replica served everything", measure)
