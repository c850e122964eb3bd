"""What the measuring client records for one stream, and the metrics derived from it.

Every definition here is the one in `docs/metrics.md`. All times are seconds on one
monotonic clock (`time.perf_counter()`), measured from the moment the request was written to
the socket (t = 0).

Percentiles are nearest-rank: the p-th percentile of n sorted values is the value at rank
ceil(p/100 * n) (1-based). It always returns an observed value, so with 20 events "p99" is
simply the largest gap, never an interpolated number that no token experienced.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Literal, Sequence

from labs.client.sse import EventKind

Outcome = Literal[
    "complete",  # saw the protocol's terminal event: [DONE], response.completed, message_stop
    "truncated",  # the response ended (FIN or end of body) without it
    "error-in-band",  # an error event arrived after the headers (chat `error`, response.failed, event: error)
    "http-error",  # the status was >= 400
    "reset",  # the OS reported a reset, or the connection closed before any response headers
    "timeout",  # read_timeout_s of silence, or the total deadline, ended the measurement
    "disconnected",  # the client left on purpose (disconnect_after_events)
    "connect-error",  # no TCP connection (refused, unreachable, connect timeout)
]
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]

REPLACEMENT_CHAR = "\ufffd"


@dataclass(slots=True)
class Event:
    """One SSE event (or comment line) as the client dispatched it.

    `t`: arrival, seconds since the request was sent (the read that completed the event).
    `read`: 1-based index of the socket read that carried it; events with the same index were
    coalesced by some hop. `hop_s`: receive wall time minus the server's `sent_at` stamp.
    """

    t: float
    read: int
    kind: EventKind
    text: str = ""
    hop_s: float | None = None


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (see the module docstring); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def percentile_band(values: Sequence[float], p: float, z: float = 2.0) -> list[float] | None:
    """How precisely these values fix their p-th percentile: the values at the nearest ranks
    z binomial standard deviations either side of it (sqrt(n p (1 - p)) ranks; z = 2: ~95%).
    The p99 of 300 values is one of about the top seven; of 48,000, a narrow band."""
    if not values:
        return None
    ordered, n, q = sorted(values), len(values), p / 100.0
    rank, spread = math.ceil(q * n), z * math.sqrt(n * q * (1.0 - q))
    low, high = max(1, math.floor(rank - spread)), min(n, math.ceil(rank + spread))
    return [ordered[low - 1], ordered[high - 1]]


def _pcts(values: Sequence[float], prefix: str, ps: Iterable[int] = (50, 90, 99)) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"{prefix}_p{p}_s": percentile(values, p) for p in ps}
    out[f"{prefix}_max_s"] = max(values) if values else None
    return out


@dataclass
class StreamResult:
    """Everything the client saw of one request. `to_dict()` gives plain JSON types."""

    url: str = ""
    mode: str = "stream"
    status: int | None = None
    http_version: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased
    content_encoding: str | None = None  # e.g. "gzip"; the body was decoded incrementally
    outcome: str = "truncated"
    error: str | None = None  # in-band error message, "HTTP 504 ...", or the transport error
    body_snippet: str | None = None  # the first 2 KiB of a >= 400 response body
    connect_s: float | None = None  # TCP (and TLS) connect, before t = 0
    start_s: float = 0.0  # when t = 0 fell, seconds after the batch began (run_many)
    ttfb_s: float | None = None  # first response byte
    headers_s: float | None = None  # the response headers (HTTP/1.1: the read completing them; HTTP/2: HEADERS)
    ttft_s: float | None = None  # first content event (a text delta; never a lifecycle event)
    e2e_s: float | None = None  # last response byte
    disconnect_s: float | None = None  # when the client closed the socket on purpose
    end_s: float | None = None  # when the exchange ended: last chunk, FIN, RST, timeout, departure
    events: list[Event] = field(default_factory=list)
    reads: int = 0  # socket reads that returned data
    text: str = ""  # the content deltas, concatenated
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    heartbeats: int = 0  # SSE comment lines, and the protocol's keep-alive events (Messages' ping), seen
    wire_bytes: int = 0  # body bytes as they came off the wire (compressed if encoded)
    body_bytes: int = 0  # body bytes after content decoding
    body_complete: bool = False  # HTTP framing ended properly (last chunk / length / close)
    saw_done: bool = False  # the protocol's terminal event arrived

    # ---- derived metrics -------------------------------------------------------------------

    @property
    def content(self) -> list[Event]:
        return [e for e in self.events if e.kind == "content"]

    @property
    def content_events(self) -> int:
        return sum(1 for e in self.events if e.kind == "content")

    @property
    def gaps(self) -> list[float]:
        """Times between consecutive content events (ITL); coalesced events give 0 gaps."""
        times = [e.t for e in self.events if e.kind == "content"]
        return [b - a for a, b in zip(times, times[1:])]

    @property
    def event_gaps(self) -> list[float]:
        """Times between consecutive events of any kind, lifecycle events, pings and comment
        lines included: what a hop's idle timer sees, where `gaps` is what a reader sees."""
        times = [e.t for e in self.events]
        return [b - a for a, b in zip(times, times[1:])]

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (content events - 1); None with fewer than two content events."""
        n = self.content_events
        if n < 2 or self.ttft_s is None or self.e2e_s is None:
            return None
        return (self.e2e_s - self.ttft_s) / (n - 1)

    @property
    def content_reads(self) -> Counter[int]:
        """Content events per socket read, for the reads that carried any."""
        return Counter(e.read for e in self.events if e.kind == "content")

    @property
    def bursts(self) -> int:
        """Distinct socket reads that carried content events (20 when every token streamed)."""
        return len(self.content_reads)

    @property
    def hop_delays(self) -> list[float]:
        """Receive wall time minus the server's stamp, for every stamped event."""
        return [e.hop_s for e in self.events if e.hop_s is not None]

    @property
    def replacement_chars(self) -> int:
        """U+FFFD in the content text: bytes the server could not decode, or sent broken."""
        return self.text.count(REPLACEMENT_CHAR)

    def stop_leak(self, stops: str | Sequence[str] | None) -> str | None:
        """The stop text that reached the client, or None.

        A leak is a stop sequence anywhere in the text, or a non-empty proper prefix of one
        at the very end of the text (the server released the start of a stop that then
        completed, and should have held it back). Returns the leaked fragment.
        """
        if not stops:
            return None
        for stop in [stops] if isinstance(stops, str) else stops:
            if not stop:
                continue
            if stop in self.text:
                return stop
            for k in range(len(stop) - 1, 0, -1):
                if self.text.endswith(stop[:k]):
                    return stop[:k]
        return None

    def script_match(self, script: str | None) -> bool | None:
        """Whether the content text equals the script exactly; None when no script was sent."""
        return None if script is None else self.text == script

    def summary(self, stops: str | Sequence[str] | None = None, script: str | None = None) -> dict[str, Any]:
        """The per-stream numbers, always with the same keys (None where not applicable)."""
        per_read = list(self.content_reads.values())
        out: dict[str, Any] = {
            "status": self.status,
            "outcome": self.outcome,
            "error": self.error,
            "content_encoding": self.content_encoding,
            "ttfb_s": self.ttfb_s,
            "ttft_s": self.ttft_s,
            "e2e_s": self.e2e_s,
            "tpot_s": self.tpot_s,
        }
        out.update(_pcts(self.gaps, "gap"))
        event_gaps = self.event_gaps
        out.update(
            event_gap_max_s=max(event_gaps) if event_gaps else None,
            events=len(self.events),
            content_events=self.content_events,
            reads=self.reads,
            bursts=len(per_read),
            events_per_read_mean=(sum(per_read) / len(per_read)) if per_read else None,
            events_per_read_max=max(per_read) if per_read else None,
        )
        hops = self.hop_delays
        out.update(
            hop_p50_s=percentile(hops, 50),
            hop_p99_s=percentile(hops, 99),
            hop_max_s=max(hops) if hops else None,
            heartbeats=self.heartbeats,
            body_bytes=self.body_bytes,
            wire_bytes=self.wire_bytes,
            replacement_chars=self.replacement_chars,
            finish_reason=self.finish_reason,
            saw_done=self.saw_done,
            disconnect_s=self.disconnect_s,
            end_s=self.end_s,
            stop_leak=self.stop_leak(stops),
            script_match=self.script_match(script),
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamResult:
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        d["events"] = [Event(**e) for e in d.get("events", [])]
        return cls(**d)


def aggregate(results: Sequence[StreamResult], client_cpu_s: float | None = None,
              wall_s: float | None = None) -> dict[str, Any]:
    """Numbers over many streams: outcome counts, TTFT and pooled-gap percentiles.

    Gaps are pooled over every stream's content events (each stream contributes its own
    consecutive differences). `client_cpu_per_event_us` is the client's own CPU divided by
    the events it dispatched, so a reader can tell the client was not the bottleneck.
    """
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    e2es = [r.e2e_s for r in results if r.e2e_s is not None]
    gaps = [g for r in results for g in r.gaps]
    events = sum(len(r.events) for r in results)
    content = sum(r.content_events for r in results)
    counts = Counter(r.outcome for r in results)
    out: dict[str, Any] = {
        "streams": len(results),
        "outcomes": {k: counts[k] for k in OUTCOMES if counts[k]},
        "statuses": dict(Counter(str(r.status) for r in results)),
        "content_events": content,
        "events": events,
    }
    out.update(_pcts(ttfts, "ttft"))
    out.update(_pcts(e2es, "e2e", (50, 99)))
    out.update(_pcts(gaps, "gap"))
    out["wall_s"] = wall_s
    out["client_cpu_s"] = client_cpu_s
    out["client_cpu_per_event_us"] = (
        client_cpu_s / events * 1e6 if client_cpu_s is not None and events else None
    )
    return out
