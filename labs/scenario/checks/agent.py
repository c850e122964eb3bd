"""Checks of a coding agent as the client (labs/client/agent_streams.py): its exit status, its
retries, the requests the server served it, and the server's record of its last request, which
proves what the agent itself cannot show (the silence happened, the cut came in it)."""
from __future__ import annotations

from typing import Any

from labs.client.durations import milliseconds
from labs.scenario.checks.stress import CUT_SHARE
from labs.scenario.model import Check, Run


def _agent_runs(run: Run) -> list[Any]:
    return [r for r in run.results if hasattr(r, "returncode")]


def agent_exited(code: int) -> Check:
    """Every agent run ended with exit status `code` (and an agent ran at all)."""
    def measure(run: Run) -> tuple[str, bool]:
        codes = [r.returncode for r in _agent_runs(run)]
        return f"exit status {', '.join(map(str, codes)) or 'none (no agent ran)'}", bool(codes) and all(
            c == code for c in codes)
    return Check(f"the agent exits with status {code}", measure)


def agent_retried(at_least: int) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        retries = [r.retries for r in _agent_runs(run)]
        return f"{', '.join(map(str, retries)) or 'no'} retries printed", bool(retries) and min(retries) >= at_least
    return Check(f"the agent retried the stream (>= {at_least} `Reconnecting...` lines)", measure)


def agent_requests(api: str, count: int, stream: bool = True) -> Check:
    """The server admitted exactly `count` streamed (or unstreamed) requests of `api` during the
    variant: one per try the agent made, its retries and fallbacks included."""
    metric = f'streamlab_api_requests_total{{api="{api}",stream="{str(stream).lower()}"}}'
    kind = "streamed" if stream else "unstreamed"

    def measure(run: Run) -> tuple[str, bool]:
        served = run.metric(metric)
        return f"{served:g} {kind} {api} requests served", served == count
    return Check(f"the server served {count} {kind} {api} request(s)", measure)


def _record(run: Run) -> dict[str, Any]:
    records = [r.record for r in _agent_runs(run)]
    return records[0] if records and records[0] else {}


def cut_in_the_silence(timeout_s: float, what: str) -> Check:
    """The server's record of the agent's last try: no token had left when the client side went
    away, at least CUT_SHARE of `timeout_s` after the headers: the silence reached the timeout,
    which ended the try (not an earlier failure)."""
    def measure(run: Run) -> tuple[str, bool]:
        record = _record(run)
        gone = record.get("client_gone_after_s")
        shown = (f"the server saw the client go after {milliseconds(gone)}, "
                 f"first token {record.get('first_token_after_s')}") if record else "no record"
        return shown, gone is not None and record.get("first_token_after_s") is None and (
            gone >= CUT_SHARE * timeout_s)
    return Check(f"each try is cut in the silence, after >= {CUT_SHARE:.0%} of {what} ({timeout_s:g} s)",
                 measure)


def sat_through_the_silence(silence_s: float, what: str) -> Check:
    """The server's record of the agent's last try: its first token left no sooner than
    `silence_s` (the think happened) and the stream ran to its end with the client there."""
    def measure(run: Run) -> tuple[str, bool]:
        record = _record(run)
        first = record.get("first_token_after_s")
        shown = (f"first token after {milliseconds(first)}, outcome {record.get('outcome')}"
                 if record else "no record")
        return shown, first is not None and first >= silence_s and record.get("outcome") == "complete"
    return Check(f"the try sat through {what} ({silence_s:g} s) to the end", measure)
