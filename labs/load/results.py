"""The load lab's results as plain data: one step (`StepResult`), a limit that was hit (`Limit`),
and what "healthy" means for a step. A path's steps with the limit they hit are `PathResult`
(labs/load/analysis.py, which finds the limit)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping

from labs.findings.connection_limit import Burst

# What "healthy" means for a step (the package docstring, labs/load/__init__.py).
MIN_RATE_PCT = 90.0
MAX_TTFT_P99_S = 1.0
MAX_GAP_FACTOR = 2.0  # gap p99 over 2 token intervals: a token waited as long as a whole tick


@dataclass
class Limit:
    """A limit that was hit, with the evidence that names it."""

    name: str
    where: Literal["proxy", "server", "client", "cpu", "unknown"]
    evidence: str


@dataclass
class StepResult:
    """One step of one path, as plain data (the report's JSON is `asdict` of this)."""

    path: str
    concurrency: int
    tokens_per_stream: int
    tokens_per_s: float
    duration_s: float
    outcomes: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # client-side error text -> count
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_max_s: float | None = None
    gap_p50_s: float | None = None
    gap_p99_s: float | None = None
    gap_max_s: float | None = None
    hop_p50_s: float | None = None
    hop_p99_s: float | None = None
    content_events: int = 0
    wall_s: float = 0.0
    # Delivered tok/s while (95% of) the streams were open: content events that arrived in
    # `steady_window`, over its length. The ramp (a burst of N connects and admissions) is
    # judged by TTFT instead; with no such window (the streams ran in waves) it falls back to
    # all events over the wall time.
    delivered_tok_s: float = 0.0
    steady_window_s: float | None = None
    steady_gap_p99_s: float | None = None  # gaps inside that window: the load once it is open
    ttft_histogram: dict[str, int] = field(default_factory=dict)  # "<0.1 s": count, ...
    # Machine-wide TCP counters moved during the step (/proc/net/netstat): a full accept queue
    # drops the handshake's last ACK, and the client's request then waits for the server's
    # SYN-ACK retransmits (1 s, 3 s, 7 s): TTFT in steps of seconds with no error anywhere.
    tcp_counters: dict[str, int] = field(default_factory=dict)
    machine_busy_pct: float = 0.0  # every process on the machine, % of one core (200 = both)
    server_accept_queue_peak: int = 0
    client_cpu_s: float = 0.0
    client_cpu_per_event_us: float | None = None
    # The busiest second of the busiest client process (Locust: the master or one worker), % of
    # one core: a single-threaded client process near 100% is the client's own limit.
    client_peak_cpu_pct: float | None = None
    # How precisely the step's samples fix each percentile (labs.client.results.percentile_band):
    # "ttft_p50", "ttft_p99", "gap_p50", "gap_p99" -> [low, high] seconds.
    percentile_bands_s: dict[str, list[float]] = field(default_factory=dict)
    client_peak_process: str | None = None
    server: dict[str, Any] = field(default_factory=dict)  # resources.Usage.to_dict()
    proxy: dict[str, Any] | None = None
    accept_queue_peak: int = 0  # at the entry point's listen socket
    server_statuses: dict[str, int] = field(default_factory=dict)  # the server's own count
    server_tokens: int = 0
    server_writes: int = 0  # body writes of streaming responses (streamlab_stream_writes_total)
    proxy_log: dict[str, int] = field(default_factory=dict)  # deduplicated warn/error lines
    proxy_access: dict[str, int] = field(default_factory=dict)  # status (and flags) counts
    proxy_counters: dict[str, int] = field(default_factory=dict)  # Envoy counter deltas
    server_log: dict[str, int] = field(default_factory=dict)
    limits: list[Limit] = field(default_factory=list)

    # ---- derived -------------------------------------------------------------------------

    @property
    def completed(self) -> int:
        return self.outcomes.get("complete", 0)

    @property
    def failed(self) -> int:
        return self.concurrency - self.completed

    @property
    def ideal_tok_s(self) -> float:
        return self.concurrency * self.tokens_per_s

    @property
    def tok_s(self) -> float:
        return self.delivered_tok_s

    @property
    def wall_tok_s(self) -> float:
        """Every content event over the step's wall time (connect ramp and stragglers included)."""
        return self.content_events / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def rate_pct(self) -> float:
        return 100.0 * self.tok_s / self.ideal_tok_s if self.ideal_tok_s else 0.0

    @property
    def client_cpu_pct(self) -> float:
        return 100.0 * self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def healthy(self) -> bool:
        interval = 1.0 / self.tokens_per_s
        return (self.failed == 0 and self.rate_pct >= MIN_RATE_PCT
                and (self.ttft_p99_s or 0.0) <= MAX_TTFT_P99_S
                and (self.gap_p99_s or 0.0) <= MAX_GAP_FACTOR * interval)

    @property
    def healthy_but_ttft(self) -> bool:
        """Everything but TTFT p99 is fine: the burst of arrivals is the only problem."""
        interval = 1.0 / self.tokens_per_s
        return (self.failed == 0 and self.rate_pct >= MIN_RATE_PCT
                and (self.gap_p99_s or 0.0) <= MAX_GAP_FACTOR * interval)

    def burst(self) -> Burst:
        """The step as the connection-limit judge reads it. Every stream was asked for at once
        (or over the ramp, each TTFT counted from its own start), so a wait is the TTFT itself;
        a step keeps percentiles, not streams, so the latest wait is the TTFT p99, against the
        length each stream was asked to run."""
        return Burst(self.concurrency, dict(self.outcomes), first_wait_s=0.0,
                     last_wait_s=self.ttft_p99_s, stream_s=self.duration_s)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(completed=self.completed, failed=self.failed, ideal_tok_s=self.ideal_tok_s,
                 wall_tok_s=round(self.wall_tok_s, 1), rate_pct=round(self.rate_pct, 1),
                 client_cpu_pct=round(self.client_cpu_pct, 1), healthy=self.healthy)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepResult:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["limits"] = [Limit(**x) for x in d.get("limits", [])]
        return cls(**known)
