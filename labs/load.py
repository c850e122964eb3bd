"""The load lab: ramp concurrent streams through each path and name the first limit it hits.

    python -m labs run load                  # every path, the default ramp (a few minutes)
    python -m labs.load --paths direct,nginx-broken --steps 100,300 --duration 5

A path is a way to the server (direct, or one proxy with its broken limit or its fixed config,
or a teaching row: httpx's default pool, a server under `ulimit -n 512`, the tiny model at its
slot limit). Each step opens N streams at once, every stream paced by the server at 20 tok/s for
`duration_s`, and waits for all of them (bounded: a total deadline per step). Per step: outcomes,
TTFT and gap percentiles, delivered tok/s against the ideal N x 20 tok/s, CPU and open fds of
the server, the proxy and the client itself, the proxy's accept queue, and the evidence the
processes left (log lines, Envoy counters, HTTP statuses counted by the server).

A step is healthy when every stream completed, at least 90% of the ideal rate arrived, TTFT p99
stayed under 1 s and gap p99 under two token intervals. The first unhealthy step of a
path is its first limit; `diagnose` names it from the evidence (rules in the order a reader
would check them: what the proxy said, what the server answered, what the client did, then
whose CPU ran out).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import re
import resource
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

from labs import client
from labs.measurements import Event, StreamResult, aggregate, percentile
from labs.resources import Sampler, raise_own_fd_limit
from labs.sse_parser import classify

REPO_ROOT = Path(__file__).resolve().parent.parent
PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
# Every stream is scripted with short ASCII words: with the lab's byte-level BPE each token then
# decodes to text on its own, so one token is one SSE event and gaps are pure pacing. Unscripted,
# the synthetic engine cycles through the corpus, whose Japanese and emoji span several tokens:
# the detokenizer holds those back, and gap p99 reads 2 intervals (100 ms) with nothing wrong.
# The tiny model is teacher-forced on the same text (one real forward pass per token).
SCRIPT_SENTENCE = "Every token should reach the reader the moment the model makes it. "


def script(tokens: int) -> str:
    """A script of at least `tokens` tokens (each sentence is more than 8)."""
    return (SCRIPT_SENTENCE * (tokens // 8 + 2)).strip()

ClientKind = Literal["lean", "httpx-default"]
Role = Literal["direct", "broken", "fixed", "teaching"]
Progress = Callable[[str], None]

# What "healthy" means for a step (module docstring).
MIN_RATE_PCT = 90.0
MAX_TTFT_P99_S = 1.0
MAX_GAP_FACTOR = 2.0  # gap p99 over 2 token intervals: a token waited as long as a whole tick
BUSY_CPU_PCT = 85.0  # of one core: a single-threaded process this busy is the bottleneck
MACHINE_CORES = 2


@dataclass(frozen=True)
class ServerSpec:
    """How the server runs for a path. Paths with equal specs share one server."""

    engine: Literal["synthetic", "transformers"] = "synthetic"
    slots: int = 1100  # more than the largest step: the engine's admission is not under test
    max_queue: int = 0
    fd_soft_limit: int | None = None  # start it under this `ulimit -n` (and keep it)

    def args(self) -> list[str]:
        args = ["--engine", self.engine, "--slots", str(self.slots), "--max-queue",
                str(self.max_queue), "--log-level", "warning"]
        return args + (["--keep-fd-limit"] if self.fd_soft_limit else [])


@dataclass(frozen=True)
class LoadPath:
    """One row group of the lab: where the streams go and which limit it teaches."""

    name: str
    role: Role
    limit: str  # the limit this path has, in words (the config line a reader would grep for)
    proxy: str | None = None  # nginx | haproxy | envoy; None = straight to the server
    base: str = "fixed"  # the proxy's base settings; `overrides` switch the limit on
    overrides: Mapping[str, Any] = field(default_factory=dict)
    server: ServerSpec = ServerSpec()
    client: ClientKind = "lean"
    steps: tuple[int, ...] = (100, 300, 1000)
    duration_s: float | None = None  # None: the lab's duration
    stop_at_limit: bool = False  # a broken path stops ramping once its limit is shown


SYNTHETIC = ServerSpec()
PATHS: tuple[LoadPath, ...] = (
    LoadPath("direct", "direct", "none: straight to the server (slots 1100, fd limit raised)",
             steps=(10, 100, 300, 1000)),
    LoadPath("client-httpx-pool", "teaching", "httpx.AsyncClient() defaults: a pool of 100 connections",
             client="httpx-default", steps=(300,), stop_at_limit=True),
    LoadPath("server-fd-512", "teaching", "server under `ulimit -n 512` (--keep-fd-limit)",
             server=ServerSpec(fd_soft_limit=512), steps=(300, 1000), stop_at_limit=True),
    LoadPath("nginx-broken", "broken", "worker_processes 1; worker_connections 512 (nginx's default)",
             proxy="nginx", overrides={"worker_processes": 1, "worker_connections": 512},
             stop_at_limit=True),
    LoadPath("nginx-fixed", "fixed", "proxies/fixed/nginx.conf", proxy="nginx"),
    LoadPath("haproxy-broken", "broken", "maxconn 256 (global and frontend)", proxy="haproxy",
             overrides={"maxconn_global": 256, "maxconn_frontend": 256}, stop_at_limit=True),
    LoadPath("haproxy-fixed", "fixed", "proxies/fixed/haproxy.cfg", proxy="haproxy"),
    LoadPath("envoy-broken", "broken", "circuit breakers max_requests 256, max_pending_requests 256 "
             "(defaults: 1024)", proxy="envoy",
             overrides={"max_requests": 256, "max_pending_requests": 256}, stop_at_limit=True),
    LoadPath("envoy-fixed", "fixed", "proxies/fixed/envoy.yaml", proxy="envoy"),
    LoadPath("tiny-model-slots", "teaching", "tiny transformers model: --slots 8 --max-queue 8",
             server=ServerSpec(engine="transformers", slots=8, max_queue=8), steps=(8, 32),
             duration_s=2.0),
)


def get_path(name: str) -> LoadPath:
    for path in PATHS:
        if path.name == name:
            return path
    raise KeyError(f"no load path {name!r}; known: {', '.join(p.name for p in PATHS)}")


# ---- results ---------------------------------------------------------------------------------


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


@dataclass
class PathResult:
    path: LoadPath
    steps: list[StepResult] = field(default_factory=list)
    error: str | None = None  # the path could not run (a proxy missing, a server that failed)

    @property
    def first_limit(self) -> tuple[StepResult, list[Limit]] | None:
        return first_limit(self.steps)

    def to_dict(self) -> dict[str, Any]:
        hit = self.first_limit
        return {"path": {**asdict(self.path), "server": asdict(self.path.server)},
                "steps": [s.to_dict() for s in self.steps], "error": self.error,
                "first_limit": None if hit is None else {
                    "concurrency": hit[0].concurrency, "limits": [asdict(x) for x in hit[1]]}}


# ---- the analysis ------------------------------------------------------------------------------


def _symptom(step: StepResult) -> str:
    """The numbers that made the step unhealthy, in one line."""
    parts = []
    if step.failed:
        outcomes = ", ".join(f"{n} {k}" for k, n in sorted(step.outcomes.items()) if k != "complete")
        parts.append(f"{step.failed} of {step.concurrency} streams failed ({outcomes})")
    if step.rate_pct < MIN_RATE_PCT:
        parts.append(f"{step.tok_s:,.0f} tok/s = {step.rate_pct:.0f}% of the ideal {step.ideal_tok_s:,.0f}")
    if (step.ttft_p99_s or 0.0) > MAX_TTFT_P99_S:
        parts.append(f"TTFT p99 {step.ttft_p99_s:.2f} s")
    if (step.gap_p99_s or 0.0) > MAX_GAP_FACTOR / step.tokens_per_s:
        parts.append(f"gap p99 {1e3 * (step.gap_p99_s or 0):.0f} ms "
                     f"(the server paces {1e3 / step.tokens_per_s:.0f} ms)")
    return "; ".join(parts) or "healthy"


def _matching(lines: Mapping[str, int], pattern: str) -> str | None:
    for line, count in lines.items():
        if re.search(pattern, line, re.IGNORECASE):
            return f"{line!r}" + (f" (x{count})" if count > 1 else "")
    return None


def diagnose(step: StepResult) -> list[Limit]:
    """Name the limits an unhealthy step hit, most specific first; [] for a healthy step."""
    if step.healthy:
        return []
    symptom = _symptom(step)
    found: list[Limit] = []

    def add(name: str, where: Any, evidence: str) -> None:
        found.append(Limit(name, where, f"{symptom}. Evidence: {evidence}"))

    if line := _matching(step.proxy_log, r"worker_connections are not enough"):
        add("nginx worker_connections", "proxy", f"nginx error log {line}")
    if line := _matching(step.proxy_log, r"too many open files"):
        add("proxy open-file limit (EMFILE)", "proxy", f"proxy log {line}")
    overflow = {k: v for k, v in step.proxy_counters.items() if "overflow" in k and v}
    if overflow:
        counters = ", ".join(f"{k} +{v}" for k, v in sorted(overflow.items()))
        add("Envoy circuit breaker", "proxy", f"Envoy counters {counters}")
    waves = (step.ttft_p99_s or 0.0) >= 0.9 * step.duration_s  # waited for a whole stream
    if step.proxy is not None and step.accept_queue_peak and waves:
        add("proxy stops accepting (maxconn): streams wait in the kernel's accept queue", "proxy",
            f"accept queue of the proxy's listen socket peaked at {step.accept_queue_peak}, nothing "
            f"in its logs; TTFT p99 {step.ttft_p99_s:.1f} s ~ one stream's length "
            f"({step.duration_s:g} s): the extra streams start when others end")
    overflows = step.tcp_counters.get("ListenOverflows", 0)
    if overflows and (step.ttft_p99_s or 0.0) > MAX_TTFT_P99_S and not waves:
        slow = {k: v for k, v in step.ttft_histogram.items() if not k.startswith(("<0.1", "<0.5", "<1 "))}
        add("a listen queue overflowed: handshakes retransmitted (1 s, 3 s, 7 s)", "proxy" if step.proxy else "server",
            f"ListenOverflows +{overflows}, TCPSynRetrans +{step.tcp_counters.get('TCPSynRetrans', 0)} "
            f"(/proc/net/netstat, whole machine); TTFT >= 1 s: {slow}; accept queue peaks "
            f"entry {step.accept_queue_peak}, server {step.server_accept_queue_peak}")
    if n := step.server_statuses.get("429"):
        add("engine slots and queue full (429 queue_full)", "server",
            f"the server answered HTTP 429 to {n} requests (streamlab_requests_total)")
    for name, usage in (("server", step.server), ("proxy", step.proxy)):
        if usage and usage.get("fd_limit") and usage["fds_peak"] >= usage["fd_limit"] - 2:
            add(f"{name} open-file limit (soft RLIMIT_NOFILE {usage['fd_limit']})", name,
                f"{name} open fds peaked at {usage['fds_peak']} = its soft limit "
                f"{usage['fd_limit']} (/proc/PID/limits); the client saw "
                f"{step.outcomes.get('reset', 0)} connections closed before any response, the "
                f"server counted {step.server_statuses.get('200', 0)} requests")
    emfile = _matching(step.server_log, r"too many open files|EMFILE")
    if emfile or step.server_statuses.get("500"):
        fds = step.server.get("fds_peak"), step.server.get("fd_limit")
        add("server open-file limit (EMFILE)", "server",
            f"{step.server_statuses.get('500', 0)} HTTP 500 from the server; open fds peaked at "
            f"{fds[0]} of the soft limit {fds[1]}" + (f"; server log {emfile}" if emfile else ""))
    if pool := _matching(step.errors, r"PoolTimeout"):
        add("client connection pool", "client", f"client errors {pool}: the requests never left "
            f"the client, the server saw {sum(step.server_statuses.values())}")
    if found:
        return found
    if (step.ttft_p99_s or 0.0) > MAX_TTFT_P99_S and step.failed == 0 and not waves:
        per_request = (step.ttft_p99_s or 0.0) / step.concurrency * 1e3
        add("server admission of a burst (CPU per request)", "server",
            f"all {step.concurrency} requests arrive at once and the server admits them one after "
            f"another (parse, validate, chat template, tokenize): TTFT p50 "
            f"{_ms_text(step.ttft_p50_s)}, p99 {_ms_text(step.ttft_p99_s)} (p99 / N = {per_request:.1f} "
            f"ms per request ahead); the server's accept queue peaked at "
            f"{step.server_accept_queue_peak}, server CPU {step.server.get('cpu_pct', 0):.0f}%")
        if step.healthy_but_ttft:
            return found
    interval = 1.0 / step.tokens_per_s
    gap, hop = step.gap_p99_s or 0.0, step.hop_p99_s
    if gap > MAX_GAP_FACTOR * interval and hop is not None:
        # The server stamps each event as it writes it: a late token with a small hop delay
        # left the server late; a large hop delay was held up on the way (proxy, kernel, client).
        if hop < (gap - interval) / 2:
            add("the server sends late (a stall inside the server: event loop, GC pauses)", "server",
                f"gap p99 {gap * 1e3:.0f} ms but hop delay p99 (server stamp -> client) only "
                f"{hop * 1e3:.0f} ms: the tokens left the server late, the path did not hold them")
        else:
            add("delivery late after the server (proxy, kernel or client)", "unknown",
                f"hop delay p99 (server stamp -> client) {hop * 1e3:.0f} ms of a gap p99 of "
                f"{gap * 1e3:.0f} ms")
    # Nothing said "no": whose CPU ran out? (percent of one core; the machine has two)
    cpu = {"server": step.server.get("cpu_pct") or 0.0, "client": step.client_cpu_pct}
    if step.proxy is not None:
        cpu["proxy"] = step.proxy.get("cpu_pct") or 0.0
    total = sum(cpu.values())
    shares = ", ".join(f"{k} {v:.0f}%" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
    busiest = max(cpu, key=lambda k: cpu[k])
    machine = max(step.machine_busy_pct, total)
    others = max(0.0, step.machine_busy_pct - total)
    where = f"CPU, % of one core: {shares}, other processes {others:.0f}% (machine {machine:.0f}% of {100 * MACHINE_CORES}%)"
    if cpu[busiest] >= BUSY_CPU_PCT:
        add(f"{busiest} CPU (one core)", "cpu", where)
    elif machine >= BUSY_CPU_PCT * MACHINE_CORES:
        add(f"machine CPU ({MACHINE_CORES} cores shared by client, proxy, server and others)", "cpu", where)
    elif not found:
        add("unexplained", "unknown", f"no log line, counter or busy CPU; {where}")
    return found


def _ms_text(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.0f} ms"


def first_limit(steps: Sequence[StepResult]) -> tuple[StepResult, list[Limit]] | None:
    """The first unhealthy step in order of concurrency, and what it hit."""
    for step in sorted(steps, key=lambda s: s.concurrency):
        if not step.healthy:
            return step, step.limits or diagnose(step)
    return None


# ---- evidence ------------------------------------------------------------------------------

_NOISE = [
    (re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d "), ""),  # nginx timestamp
    (re.compile(r"^\[[^\]]*\]\s*"), ""),  # Envoy / HAProxy timestamp
    (re.compile(r"\b\d+#\d+: \*\d+ "), ""),  # nginx pid#tid: *connection
    (re.compile(r"\b\d+#\d+: "), ""),
    (re.compile(r"client: [\d.]+, server: [^,]*, "), ""),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ "), ""),  # Python logging
]
_NOTABLE = re.compile(r"warn|error|crit|alert|emerg|too many|refused|overflow|traceback|exception", re.I)


def _dedupe(lines: Sequence[str], limit: int = 8) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for line in lines:
        if not _NOTABLE.search(line):
            continue
        for pattern, repl in _NOISE:
            line = pattern.sub(repl, line)
        counts[line.strip()[:200]] += 1
    return dict(counts.most_common(limit))


class _Marks:
    """Where the logs and counters stood before a step, to report what the step added."""

    def __init__(self, server: Any, proxy: Any | None) -> None:
        self.server, self.proxy = server, proxy
        self.metrics = server.metrics()
        self.server_log = _lines(server.process.log_path)
        self.access = len(proxy.access_log()) if proxy is not None else 0
        self.errors = len(proxy.error_log().splitlines()) if proxy is not None else 0
        self.stats = _envoy_stats(proxy)
        self.tcp = tcp_counters()

    def fill(self, step: StepResult) -> None:
        after = self.server.metrics()
        for name, value in after.items():
            if name.startswith("streamlab_requests_total{"):
                status = name.split('"')[1]
                if change := int(value - self.metrics.get(name, 0.0)):
                    step.server_statuses[status] = change
        tokens = "streamlab_tokens_generated_total"
        step.server_tokens = int(after.get(tokens, 0.0) - self.metrics.get(tokens, 0.0))
        writes = "streamlab_stream_writes_total"
        step.server_writes = int(after.get(writes, 0.0) - self.metrics.get(writes, 0.0))
        step.server_log = _dedupe(_lines(self.server.process.log_path)[len(self.server_log):])
        step.tcp_counters = {k: v - self.tcp.get(k, 0) for k, v in tcp_counters().items()
                             if v - self.tcp.get(k, 0) > 0}
        if self.proxy is None:
            return
        step.proxy_log = _dedupe(self.proxy.error_log().splitlines()[self.errors:])
        entries = self.proxy.access_entries()[self.access:]
        keys = Counter(" ".join(filter(None, (e.get("status"), e.get("termination_state"),
                                               e.get("flags") if e.get("flags") != "-" else None)))
                       for e in entries)
        step.proxy_access = dict(keys.most_common(8))
        after_stats = _envoy_stats(self.proxy)
        interesting = re.compile(r"overflow|rq_5xx|rq_503|_reset|timeout|connect_fail|cx_destroy_remote")
        step.proxy_counters = {k: v - self.stats.get(k, 0) for k, v in after_stats.items()
                               if interesting.search(k) and v - self.stats.get(k, 0) > 0}


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _envoy_stats(proxy: Any | None) -> dict[str, int]:
    if proxy is None or proxy.settings.proxy != "envoy":
        return {}
    try:
        return proxy.stats()
    except OSError:
        return {}


# ---- running -----------------------------------------------------------------------------------


def _runner() -> asyncio.Runner:
    """uvloop for the client: ~19 us of client CPU per event at 1,000 streams, against ~34 us on
    the default loop (measured by the client's author), so the client stays out of the way."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


async def _lean_many(url: str, body: Mapping[str, Any], n: int, deadline_s: float) -> client.Batch:
    """`client.run_many` for a load step, except that one stream's exception cannot sink the
    batch: under uvloop, writing the request on a connection the server already closed (a
    server out of fds accepts and drops) raises RuntimeError out of `measure_stream`."""
    started, cpu0 = time.perf_counter(), time.process_time()
    payload = json.dumps(body).encode()

    async def one() -> StreamResult:
        called = time.perf_counter()
        try:
            r = await client.measure_stream(url, payload, read_timeout_s=30.0,
                                            total_timeout_s=deadline_s)
        except (RuntimeError, OSError) as exc:
            r = StreamResult(url=url, outcome="reset", error=f"{type(exc).__name__}: {exc}")
        # t = 0 of a stream is its request write, right after its connect
        r.start_s = called - started + (r.connect_s or 0.0)
        return r

    results = await asyncio.gather(*(one() for _ in range(n)))
    return client.Batch(list(results), n, time.perf_counter() - started, time.process_time() - cpu0)


async def _httpx_many(url: str, body: Mapping[str, Any], n: int, deadline_s: float) -> client.Batch:
    """What many load scripts do: one `httpx.AsyncClient()` with its defaults, N streams at once.

    httpx's default pool holds 100 connections and waits 5 s (its default timeout) for a free
    one, then raises PoolTimeout: the client's own limit, easy to mistake for the server's.
    Measures only what the lab reports (outcome, TTFT, gaps); reads are not numbered.
    """
    import httpx

    started, cpu0 = time.perf_counter(), time.process_time()

    async def one(http: httpx.AsyncClient) -> StreamResult:
        r = StreamResult(url=url)
        t0 = time.perf_counter()
        r.start_s = t0 - started
        try:
            async with http.stream("POST", url, json=body) as response:
                r.status = response.status_code
                r.ttfb_s = time.perf_counter() - t0
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    t = time.perf_counter() - t0
                    kind, text, _, sent_at, _ = classify(line[5:].strip())
                    r.events.append(Event(t, len(r.events) + 1, kind, text,
                                          None if sent_at is None else time.time() - sent_at))
                    if kind == "content" and r.ttft_s is None:
                        r.ttft_s = t
                    r.saw_done |= kind == "done"
                    r.e2e_s = t
            r.outcome = "complete" if r.saw_done else ("http-error" if (r.status or 0) >= 400 else "truncated")
        except httpx.TimeoutException as exc:
            r.outcome, r.error = "timeout", f"httpx.{type(exc).__name__}"
        except httpx.TransportError as exc:
            r.outcome, r.error = "reset", f"httpx.{type(exc).__name__}: {exc}"
        return r

    async with httpx.AsyncClient() as http:  # the defaults are the point of this row
        results = await asyncio.wait_for(asyncio.gather(*(one(http) for _ in range(n))), deadline_s)
    return client.Batch(list(results), n, time.perf_counter() - started, time.process_time() - cpu0)


def _served_model(url: str) -> str:
    with urllib.request.urlopen(url + "/v1/models", timeout=5) as response:
        return json.load(response)["data"][0]["id"]


def _wait_idle(server: Any, timeout_s: float = 15.0) -> None:
    """Let the server finish (or abort) every stream before the next step starts."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = server.metrics()
        if not m.get("streamlab_active_streams") and not m.get("streamlab_slots_in_use"):
            return
        time.sleep(0.05)


@contextlib.contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """No cyclic GC in the client while it measures. This process holds matplotlib, rich,
    pydantic and the proxies' models, and a step adds 100,000s of Event objects: a full
    collection then stops the event loop for tens of ms, and every stream's next read looks
    late (measured: hop delay p99 5.9 ms with GC, 0.5 ms without, 100 streams). A step is
    bounded, and its objects are freed by reference counting; collect once afterwards."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


@contextlib.contextmanager
def _fd_limit_for_children(limit: int | None) -> Iterator[None]:
    """Children started inside inherit this soft RLIMIT_NOFILE (the lab's `ulimit -n 512`)."""
    if limit is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@dataclass
class LoadLab:
    """Runs paths; one server per ServerSpec, started when first needed, stopped when the next
    path needs another (the transformers server should not sit beside 1,000 streams)."""

    duration_s: float = 8.0
    tokens_per_s: float = 20.0
    progress: Progress = lambda message: None  # noqa: E731
    runtime: Any = None

    def __post_init__(self) -> None:
        if self.runtime is None:
            from labs.runner import runtime_named
            self.runtime = runtime_named(None)
        self._server_spec: ServerSpec | None = None
        self._server_stack = contextlib.ExitStack()
        self._server: Any = None
        self._model = ""
        raise_own_fd_limit()

    def close(self) -> None:
        self._server_stack.close()
        self._server = self._server_spec = None

    def __enter__(self) -> LoadLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def model(self) -> str:
        """The served model's name (after `server()`)."""
        return self._model

    def server(self, spec: ServerSpec) -> Any:
        if spec != self._server_spec:
            from server.launcher import running_server

            self.close()
            self.progress(f"starting the server ({' '.join(spec.args())})")
            with _fd_limit_for_children(spec.fd_soft_limit):
                self._server = self._server_stack.enter_context(running_server(spec.args()))
            self._server_spec = spec
            self._model = _served_model(self._server.url)
        return self._server

    def run(self, paths: Sequence[LoadPath], steps: Sequence[int] | None = None) -> list[PathResult]:
        return [self.run_path(path, steps) for path in paths]

    def run_path(self, path: LoadPath, steps: Sequence[int] | None = None) -> PathResult:
        result = PathResult(path)
        try:
            server = self.server(path.server)
            with self.proxy(path, server.port) as proxy:
                for n in steps or path.steps:
                    self.progress(f"{path.name}: {n} streams")
                    step = self.run_step(path, n, server, proxy)
                    result.steps.append(step)
                    if path.stop_at_limit and not step.healthy:
                        break
        except Exception as exc:  # noqa: BLE001 - one path failing must not lose the others
            result.error = f"{type(exc).__name__}: {exc}"
        return result

    @contextlib.contextmanager
    def proxy(self, path: LoadPath, server_port: int) -> Iterator[Any]:
        if path.proxy is None:
            yield None
            return
        from labs.runner import hop_settings
        from proxies.runtime.process import free_port

        ports: dict[str, int] = {"listen_port": free_port(), "upstream_port": server_port}
        if path.proxy == "envoy":
            ports["admin_port"] = free_port()
        settings = hop_settings(path.proxy, path.overrides, path.base, **ports)
        self.progress(f"{path.name}: starting {path.proxy}")
        with self.runtime.run_proxy(settings) as proxy:
            yield proxy

    def body(self, path: LoadPath, tokens: int, extra_lab: Mapping[str, Any] | None = None) -> dict[str, Any]:
        lab: dict[str, Any] = {"tokens_per_s": self.tokens_per_s, "stamp": True,
                               "script": script(tokens), **(extra_lab or {})}
        return {"model": self._model, "messages": PROMPT, "stream": True, "max_tokens": tokens,
                "lab": lab}

    def run_step(self, path: LoadPath, n: int, server: Any, proxy: Any | None,
                 extra_lab: Mapping[str, Any] | None = None) -> StepResult:
        """N streams at once through `proxy` (or straight to `server`); `extra_lab` adds `lab`
        request fields (the benchmark's coalesce_ms)."""
        duration = path.duration_s or self.duration_s
        tokens = max(2, round(duration * self.tokens_per_s))
        entry = proxy.url if proxy is not None else server.url
        url = entry + "/v1/chat/completions"
        body = self.body(path, tokens, extra_lab)
        # Bounded: a stream that waited a whole stream in a queue still fits; nothing runs on.
        deadline = 3 * duration + 15.0
        pids = {"server": server.process.pid}
        if proxy is not None:
            pids["proxy"] = proxy.pid
        entry_port = int(entry.rsplit(":", 1)[1])
        marks = _Marks(server, proxy)
        ports = sorted({entry_port, server.port})
        with Sampler(pids, ports=ports) as sampler, _runner() as runner, _no_gc_pauses():
            if path.client == "httpx-default":
                batch = runner.run(_httpx_many(url, body, n, deadline))
            else:
                batch = runner.run(_lean_many(url, body, n, deadline))
        _wait_idle(server)
        step = summarize(path.name, batch, tokens, self.tokens_per_s, duration)
        step.server = sampler.usage["server"].to_dict()
        step.proxy = sampler.usage["proxy"].to_dict() if proxy is not None else None
        step.accept_queue_peak = sampler.queue_peak.get(entry_port, 0)
        step.server_accept_queue_peak = sampler.queue_peak.get(server.port, 0)
        step.machine_busy_pct = sampler.machine_busy_pct
        marks.fill(step)
        step.limits = diagnose(step)
        return step


def summarize(path: str, batch: client.Batch, tokens: int, tokens_per_s: float,
              duration_s: float) -> StepResult:
    """The client's side of a step (the resources and the evidence are added by the caller)."""
    agg = aggregate(batch.results, batch.client_cpu_s, batch.wall_s)
    hops = [h for r in batch.results for h in r.hop_delays]
    rate, window = steady_rate(batch.results, batch.wall_s)
    errors = Counter(_error_key(r.error) for r in batch.results if r.outcome != "complete" and r.error)
    return StepResult(
        path=path, concurrency=len(batch.results), tokens_per_stream=tokens,
        tokens_per_s=tokens_per_s, duration_s=duration_s, outcomes=agg["outcomes"],
        statuses=agg["statuses"], errors=dict(errors.most_common(6)),
        ttft_p50_s=agg["ttft_p50_s"], ttft_p99_s=agg["ttft_p99_s"], ttft_max_s=agg["ttft_max_s"],
        gap_p50_s=agg["gap_p50_s"], gap_p99_s=agg["gap_p99_s"], gap_max_s=agg["gap_max_s"],
        hop_p50_s=percentile(hops, 50), hop_p99_s=percentile(hops, 99),
        content_events=agg["content_events"], wall_s=batch.wall_s,
        delivered_tok_s=rate, steady_window_s=window,
        steady_gap_p99_s=percentile(steady_gaps(batch.results), 99),
        ttft_histogram=ttft_histogram([r.ttft_s for r in batch.results if r.ttft_s is not None]),
        client_cpu_s=batch.client_cpu_s, client_cpu_per_event_us=agg["client_cpu_per_event_us"])


def steady_window(results: Sequence[StreamResult]) -> tuple[float, float] | None:
    """(begin, end) on the batch's clock while at least 95% of the completed streams were open:
    from the 95th percentile of their first tokens to the 5th percentile of their ends (one
    straggler, e.g. a connection whose SYN was retransmitted, must not erase the window; it
    still shows in TTFT, and it costs the rate its own share). None when no window of at
    least 0.5 s exists (streams that ran in waves). Times: a stream's `start_s` + `t`."""
    done = [r for r in results if r.outcome == "complete" and r.ttft_s is not None and r.e2e_s]
    if not done:
        return None
    begin = percentile([r.start_s + (r.ttft_s or 0.0) for r in done], 95)
    end = percentile([r.start_s + (r.e2e_s or 0.0) for r in done], 5)
    if begin is None or end is None or end - begin < 0.5:
        return None
    return begin, end


def steady_rate(results: Sequence[StreamResult], wall_s: float) -> tuple[float, float | None]:
    """(tok/s, window s) while every completed stream was open; see StepResult.delivered_tok_s.
    Failed streams count for what they delivered inside the window, and not for its bounds."""
    window = steady_window(results)
    if window is not None:
        begin, end = window
        n = sum(1 for r in results for e in r.events
                if e.kind == "content" and begin <= r.start_s + e.t <= end)
        return n / (end - begin), end - begin
    content = sum(r.content_events for r in results)
    return (content / wall_s if wall_s > 0 else 0.0), None


def steady_gaps(results: Sequence[StreamResult]) -> list[float]:
    """Gaps between content events that both arrived inside the steady window."""
    window = steady_window(results)
    if window is None:
        return []
    begin, end = window
    gaps = []
    for r in results:
        times = [r.start_s + e.t for e in r.events if e.kind == "content"]
        gaps += [b - a for a, b in zip(times, times[1:]) if a >= begin and b <= end]
    return gaps


TTFT_EDGES = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)


def ttft_histogram(ttfts: Sequence[float]) -> dict[str, int]:
    """Counts per TTFT bucket: a ladder at 1, 3, 7 s is SYN-ACK retransmits, a wave at one
    stream's length is a proxy that stopped accepting."""
    counts: Counter[str] = Counter()
    for t in ttfts:
        edge = next((e for e in TTFT_EDGES if t < e), None)
        counts[f"<{edge:g} s" if edge is not None else f">={TTFT_EDGES[-1]:g} s"] += 1
    order = [f"<{e:g} s" for e in TTFT_EDGES] + [f">={TTFT_EDGES[-1]:g} s"]
    return {k: counts[k] for k in order if counts[k]}


TCP_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPSynRetrans", "TCPTimeouts", "TCPAbortOnData")


def tcp_counters() -> dict[str, int]:
    """Selected TcpExt counters of the whole machine (other processes' traffic included)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return {}
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:]))
            return {k: int(table[k]) for k in TCP_COUNTERS if k in table}
    return {}


def _error_key(error: str) -> str:
    error = re.sub(r"0x[0-9a-f]+", "0x..", error)
    return re.sub(r"\d+(\.\d+)?", "N", error)[:120]


# ---- command line ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.load", description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="", help="comma-separated path names (default: all): "
                        + ", ".join(p.name for p in PATHS))
    parser.add_argument("--steps", default="", help="comma-separated stream counts, for every path "
                        "(default: each path's own ramp)")
    parser.add_argument("--duration", type=float, default=8.0,
                        help="seconds each stream lasts (default 8: the lab fits in a few minutes)")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens/s per stream (default 20)")
    parser.add_argument("--runtime", choices=("local", "docker"), default=None)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "load")
    parser.add_argument("--reanalyse", type=Path, metavar="REPORT_JSON",
                        help="run nothing: diagnose the steps of an earlier report.json again "
                             "and rewrite the report (after a change to the rules)")
    args = parser.parse_args(argv)
    if args.reanalyse:
        return reanalyse(args.reanalyse, args.out)

    from rich.console import Console

    from labs import load_report

    paths = [get_path(n.strip()) for n in args.paths.split(",") if n.strip()] or list(PATHS)
    steps = [int(s) for s in args.steps.split(",") if s.strip()] or None
    console = Console()
    started = time.monotonic()

    def progress(message: str) -> None:
        # Plain lines, no spinner: a spinner's thread competes with the client for the GIL
        # and delays its clock readings.
        console.print(f"[dim]{message}[/]")

    with LoadLab(duration_s=args.duration, tokens_per_s=args.rate, progress=progress,
                 runtime=_named_runtime(args.runtime)) as lab:
        results = []
        for path in paths:
            results.append(lab.run_path(path, steps))
            load_report.print_path(results[-1], console)
    given = [a for a in (sys.argv[1:] if argv is None else argv)]
    if given[:1] == ["--out"] and len(given) <= 4:  # what `python -m labs run load` passes
        command = "make lab-load (python -m labs run load)"
    else:
        command = "python -m labs.load " + " ".join(given)
    meta = {"duration_s": args.duration, "tokens_per_s": args.rate,
            "wall_s": time.monotonic() - started, "command": command}
    written = load_report.write_report(results, args.out, meta)
    load_report.print_summary(results, console)
    console.print(f"report: {written['md']}  picture: {written['png']}  ({meta['wall_s']:.0f} s)")
    return 1 if any(r.error for r in results) else 0


def reanalyse(report_json: Path, out: Path) -> int:
    """Rebuild the results of an earlier run from its report.json, diagnose every step again
    with the current rules, and write the report anew."""
    from rich.console import Console

    from labs import load_report

    data = json.loads(report_json.read_text())
    results = []
    for entry in data["paths"]:
        result = PathResult(get_path(entry["path"]["name"]), error=entry.get("error"))
        for d in entry["steps"]:
            step = StepResult.from_dict(d)
            step.limits = diagnose(step)
            result.steps.append(step)
        results.append(result)
    written = load_report.write_report(results, out, data.get("meta", {}))
    load_report.print_summary(results, Console())
    print(f"report: {written['md']}")
    return 0


def _named_runtime(name: str | None) -> Any:
    from labs.runner import runtime_named
    return runtime_named(name)


if __name__ == "__main__":
    sys.exit(main())
