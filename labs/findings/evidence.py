"""What a judge reads and what it returns, shared by every kind's judge.

A tool measures; a judge decides. The tool hands the judge `Evidence`: the streams it measured
through the path and the baseline they are read against (`Pacing`: when the first token was due
and how fast the origin sent, from the workload it asked for or from the same request straight to
the server), plus the few numbers a stream alone does not carry (the silence the origin kept, the
departure the origin noticed). The judge answers with a `Verdict`: the fault or none, and what was
observed in words every tool prints as they are (verify's check table, probe's, the catalogue's
reports). Margins are token intervals of the baseline's pacing, so a judge reads a 10 tok/s
stream and a 20 tok/s one alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from labs.client.results import StreamResult, percentile


@dataclass(frozen=True)
class Pacing:
    """How the stream would arrive with nothing in between.

    first_due_s: when the first token reaches a client straight from the origin (the silences the
        workload asks for before it, or the TTFT of the same request sent to the server directly).
    interval_s: the origin's pace, one event (a token, or a heartbeat where those keep the bytes
        flowing) every `interval_s`.
    known: False when the origin cannot be steered (probe without a canary): the pace is a guess,
        so a judge asks for more before it names a fault, and says why it is unsure.
    """

    first_due_s: float
    interval_s: float
    known: bool = True


@dataclass(frozen=True)
class Evidence:
    """The measurements of one path for one kind. A judge reads the fields its module names.

    streams: what the client saw through the path (one stream, or a burst of them).
    pacing: the baseline (see Pacing).
    reference: the same request without what is under test (probe's uncompressed stream beside
        the compressed one); None where the tool has none.
    silence_s: the silence the origin kept (idle timeout), or its pause right after the client
        left (departure).
    duration_s: how long the origin was asked to stream (total timeout).
    release_s: seconds from the client leaving to the origin noticing (it stopped generating or
        freed the slot); None when it never did within the tool's wait.
    heartbeat_s: the origin's heartbeat interval through that pause (departure); None: it sent none.
    heartbeats_to_notice: of those, the one at which a path that notices a departure only at a
        write to the client does (the path's kind knows: 1 for httpd 2.4, 2 for Varnish 7.1).
    origin_first_token_s: per stream, when the origin itself sent the first token (its own
        record), so a queue at the origin is not taken for one in front of it; empty when the
        records could not be read.
    """

    streams: Sequence[StreamResult]
    pacing: Pacing
    reference: StreamResult | None = None
    silence_s: float | None = None
    duration_s: float | None = None
    release_s: float | None = None
    heartbeat_s: float | None = None
    heartbeats_to_notice: int = 1
    origin_first_token_s: Sequence[float | None] = ()

    @property
    def stream(self) -> StreamResult:
        return self.streams[0]


@dataclass(frozen=True)
class Verdict:
    """A judge's answer. `untold`: why these measurements cannot tell (the silence was not kept,
    the client never left); then `fault` is False and no tool may call the path clean on it.
    `unsure`: the fault is shown but the baseline was a guess (a warning, not a failure)."""

    fault: bool
    observed: str
    limit_s: float | None = None
    untold: str | None = None
    unsure: str | None = None


Judge = Callable[[Evidence], Verdict]


def untold(why: str) -> Verdict:
    return Verdict(False, f"not measured: {why}", untold=why)


def secs(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def events_per_read(stream: StreamResult) -> float:
    """Content events per socket read that carried any: 1 when every event streamed alone."""
    return stream.content_events / stream.bursts if stream.bursts else 0.0


def hop_spread_p50(stream: StreamResult) -> float | None:
    """Median hop delay (receive time less the origin's stamp) above the stream's fastest event:
    a clock offset between the origin and the client cancels out, so this holds when the origin's
    clock is not the client's."""
    delays = stream.hop_delays
    if not delays:
        return None
    return percentile([d - min(delays) for d in delays], 50)


def ended(stream: StreamResult) -> str:
    """`HTTP 504`, `truncated after 3 events`, `reset`... in a few words."""
    if stream.outcome == "http-error":
        return f"HTTP {stream.status}"
    if stream.outcome == "complete":
        return f"complete ({stream.content_events} events)"
    text = f"{stream.outcome} after {stream.content_events} events"
    return f"{text}, HTTP {stream.status} already sent" if stream.status else text
