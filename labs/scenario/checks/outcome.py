"""How streams ended: outcomes, HTTP statuses, reported errors, finish reasons, the events' size."""
from __future__ import annotations

from labs.client.results import StreamResult
from labs.scenario.checks.base import STREAM_SLACK_INTERVALS, after_due, outcome_counts, threshold
from labs.scenario.model import Check, Run


def outcome_is(*expected: str, share: float = 1.0) -> Check:
    """At least `share` of the streams ended with one of the expected outcomes."""
    wanted = " or ".join(expected)
    label = f"outcome {wanted}" if share == 1.0 else f"outcome {wanted} for >= {share:.0%} of streams"

    def measure(run: Run) -> tuple[str, bool]:
        hits = sum(run.outcomes().get(name, 0) for name in expected)
        return outcome_counts(run), hits >= share * len(run.results)
    return Check(label, measure)


def outcome_not_only(outcome: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        others = sum(n for name, n in run.outcomes().items() if name != outcome)
        return outcome_counts(run), others > 0
    return Check(f"some streams fail (not every outcome is {outcome})", measure)


def failed_share_at_least(share: float, outcomes: tuple[str, ...] = ("reset", "http-error")) -> Check:
    """At least `share` of the streams failed before any content, with one of `outcomes`."""
    def measure(run: Run) -> tuple[str, bool]:
        hits = sum(run.outcomes().get(o, 0) for o in outcomes)
        statuses = sorted({str(r.status) for r in run.results if r.outcome == "http-error"})
        extra = f" (HTTP {', '.join(statuses)})" if statuses else ""
        return f"{outcome_counts(run)}{extra}", hits >= share * len(run.results)
    return Check(f">= {share:.0%} of the streams fail ({' or '.join(outcomes)})", measure)


def complete_with_done() -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        bad = [r for r in run.results if not (r.outcome == "complete" and r.saw_done)]
        return f"{len(run.results) - len(bad)}/{len(run.results)} complete with [DONE]", not bad
    return Check("every stream completes with [DONE]", measure)


def status_is(status: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sorted({str(r.status) for r in run.results})
        return "status " + ", ".join(seen), all(r.status == status for r in run.results)
    return Check(f"HTTP status {status} (the failure comes after the headers)", measure)


def statuses_are(*statuses: int) -> Check:
    """The streams' HTTP statuses, in the order the workload sent them."""
    def measure(run: Run) -> tuple[str, bool]:
        seen = tuple(r.status for r in run.results)
        return "statuses " + ", ".join(map(str, seen)), seen == statuses
    return Check(f"HTTP statuses, in order: {', '.join(map(str, statuses))}", measure)


def unseen_by_server(status: int) -> Check:
    """The proxy's `status` answers never reached the server: it counted a 200 for every stream
    the client got a 200 for, and no more (its records have no trace of the others)."""
    def measure(run: Run) -> tuple[str, bool]:
        ok = sum(1 for r in run.results if r.status == 200)
        hits = sum(1 for r in run.results if r.status == status)
        served = run.metric('streamlab_requests_total{status="200"}')
        return (f"client: {ok} x 200, {hits} x {status}; the server answered {served:g} with 200",
                hits > 0 and served == ok)
    return Check(f"the {status}s never reached the server (its 200s = the client's 200s)", measure)


def status_seen(status: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        hits = sum(1 for r in run.results if r.status == status)
        return f"{hits}/{len(run.results)} streams got {status}", hits > 0
    return Check(f"some streams get HTTP {status}", measure)


def error_reported() -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        return f"{result.outcome}: {result.error!r}, [DONE] {'seen' if result.saw_done else 'missing'}", (
            result.outcome == "error-in-band" and bool(result.error) and result.saw_done)
    return Check("the client reports the in-band error, then [DONE]", measure)


def finish_reason_is(reason: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sorted({str(r.finish_reason) for r in run.results})
        return "finish_reason " + ", ".join(seen), all(r.finish_reason == reason for r in run.results)
    return Check(f"finish_reason {reason!r}", measure)


def client_error_names(name: str) -> Check:
    """The client ended with an error that names `name` (the library's own exception)."""
    def measure(run: Run) -> tuple[str, bool]:
        errors = sorted({(r.error or "no error").split("\n", 1)[0][:120] for r in run.results})
        return "; ".join(errors), all(r.error and name in r.error for r in run.results)
    return Check(f"the client raised {name}", measure)


def data_bytes_per_event_at_least(count: int, why: str) -> Check:
    """Every stream's data events averaged at least `count` bytes (as the client counted them)."""
    def measure(run: Run) -> tuple[str, bool]:
        sizes = [r.body_bytes / max(1, sum(e.kind != "comment" for e in r.events)) for r in run.results]
        return f"{min(sizes):,.0f} bytes per data event", min(sizes) >= count
    return Check(f"data events of at least {count:,} bytes ({why})", measure)


def _failure_at(result: StreamResult) -> float | None:
    """When the protocol's failure event arrived (chat's in-band error, `response.failed`,
    Messages' `event: error`), or None when none did."""
    return next((event.t for event in result.events if event.kind == "error"), None)


def failure_on_time(tokens: int) -> Check:
    """The failure event reached the client when the server sent it, after `tokens` tokens (within
    the streamed slack), whatever the connection did next: the client reported it at once."""
    return threshold(f"the failure event arrived with token {tokens} (reported at once)",
                     lambda run: _failure_at(run.first), after_due(tokens + STREAM_SLACK_INTERVALS),
                     at_least=False)


def open_after_failure(seconds: float, why: str, *, at_least: bool) -> Check:
    """How long the connection stayed open after the failure event: until the client's own idle
    bound (a stream that never ends after its failure), or closed at once. A stream without a
    failure event fails either way."""
    def held(run: Run) -> float | None:
        failed_at = _failure_at(run.first)
        return None if failed_at is None or run.first.end_s is None else run.first.end_s - failed_at
    word = "at least" if at_least else "at most"
    return threshold(f"the connection stayed open {word} {seconds:g} s after the failure event ({why})",
                     held, lambda run: seconds, at_least=at_least)
