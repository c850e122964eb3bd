"""Checks for the layers above the proxies: how the answer was framed, how the bytes were cut,
what an app hop said, which heartbeats reached the client."""
from __future__ import annotations

from labs.scenario.model import Check, Run

# A re-split stream: the client's reads outnumber the events by this factor at least (pieces of
# 1-40 bytes against events of ~200 bytes make ~10; a hop that passes reads through makes ~1).
RESPLIT_READS_PER_EVENT = 2.0


def _framing(run: Run) -> str:
    headers = run.first.headers
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked"
    return "content-length" if "content-length" in headers else "close-delimited"


def close_delimited() -> Check:
    """The answer had no chunked framing and no length: its end is the connection's close (what
    the scenario depends on; on a chunked answer the library under test shows no lag)."""
    def measure(run: Run) -> tuple[str, bool]:
        framing = _framing(run)
        return f"framing {framing}", framing == "close-delimited"
    return Check("the answer is close-delimited (no Transfer-Encoding, no Content-Length)", measure)


def framed_as(framing: str, why: str) -> Check:
    """How the answer was framed (chunked, content-length, close-delimited): a hop that read the
    body whole before sending it knows its length, so a streamed answer that arrives with a
    Content-Length proves a hop collected it."""
    def measure(run: Run) -> tuple[str, bool]:
        found = _framing(run)
        return f"framing {found}", found == framing
    return Check(f"the answer is framed {framing} ({why})", measure)


def resplit(factor: float = RESPLIT_READS_PER_EVENT) -> Check:
    """The byte stream really reached the client cut small: reads outnumber events."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        events = sum(1 for e in result.events if e.kind != "comment") or result.content_events
        ratio = result.reads / events if events else 0.0
        return f"{result.reads} reads for {events} events ({ratio:.1f} per event)", ratio >= factor
    return Check(f"the stream arrives re-split: >= {factor:g} reads per event", measure)


def hop_said(hop: str, text: str) -> Check:
    """An app hop's own output (process log, via the run's evidence) names what it did."""
    def measure(run: Run) -> tuple[str, bool]:
        lines = [line for line in run.evidence if line.startswith(f"{hop}:") and text in line]
        return (lines[0][:160] if lines else f"no {hop} line says {text!r}"), bool(lines)
    return Check(f"{hop} logs {text!r}", measure)


def heartbeats_dropped() -> Check:
    """The server sent `: ping` comments during the silence, and none reached the client."""
    def measure(run: Run) -> tuple[str, bool]:
        sent = run.metric("streamlab_heartbeats_total")
        seen = sum(r.heartbeats for r in run.results)
        return f"server sent {sent:g} pings, the client saw {seen}", sent >= 1 and seen == 0
    return Check("the server's heartbeats are dropped on the way (sent >= 1, seen 0)", measure)


def server_sent_heartbeats(count: int = 1) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        sent = run.metric("streamlab_heartbeats_total")
        return f"server sent {sent:g} pings (>= {count})", sent >= count
    return Check(f"the server sends `: ping` heartbeats during the silence (>= {count})", measure)
