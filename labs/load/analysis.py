"""The first-limit analysis: name the limit an unhealthy step hit from the evidence it left, and
a path's result (`PathResult`: its steps and the first limit they hit).

Rules in the order a reader would check them: what the proxy said, what the server answered,
what the client did, then whose CPU ran out.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from labs.client.durations import milliseconds
from labs.findings import connection_limit
from labs.load.paths import LoadPath
from labs.load.results import MAX_GAP_FACTOR, MAX_TTFT_P99_S, MIN_RATE_PCT, Limit, StepResult

BUSY_CPU_PCT = 85.0  # of one core: a single-threaded process this busy is the bottleneck
MACHINE_CORES = 2


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
        parts.append(f"gap p99 {milliseconds(step.gap_p99_s or 0)} "
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
    waves = connection_limit.waves(step.burst())  # the late streams waited for a whole stream
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
            f"{milliseconds(step.ttft_p50_s, grouped=True)}, p99 {milliseconds(step.ttft_p99_s, grouped=True)} "
            f"(p99 / N = {per_request:.1f} ms per request ahead); the server's accept queue peaked at "
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
                f"gap p99 {milliseconds(gap)} but hop delay p99 (server stamp -> client) only "
                f"{milliseconds(hop)}: the tokens left the server late, the path did not hold them")
        else:
            add("delivery late after the server (proxy, kernel or client)", "unknown",
                f"hop delay p99 (server stamp -> client) {milliseconds(hop)} of a gap p99 of "
                f"{milliseconds(gap)}")
    # Nothing said "no": whose CPU ran out? (percent of one core; the machine has two)
    cpu = {"client": step.client_cpu_pct}
    if step.server:  # sampled when the lab runs the server (`labs load URL` cannot see it)
        cpu["server"] = step.server.get("cpu_pct") or 0.0
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


def first_limit(steps: Sequence[StepResult]) -> tuple[StepResult, list[Limit]] | None:
    """The first unhealthy step in order of concurrency, and what it hit."""
    for step in sorted(steps, key=lambda s: s.concurrency):
        if not step.healthy:
            return step, step.limits or diagnose(step)
    return None


@dataclass
class PathResult:
    path: LoadPath
    steps: list[StepResult] = field(default_factory=list)
    error: str | None = None  # the path could not run (a proxy missing, a server that failed)

    @property
    def first_limit(self) -> tuple[StepResult, list[Limit]] | None:
        return first_limit(self.steps)

    @property
    def inconclusive(self) -> tuple[StepResult, list[Limit]] | None:
        """The step where the measurement, not the path, ran out, when it left no verdict. The
        load lab samples its own processes and names a busy client as that path's limit, so
        never here; `labs load URL` overrides it (labs/pathload/ramp.py)."""
        return None

    def to_dict(self) -> dict[str, Any]:
        hit = self.first_limit
        return {"path": {**asdict(self.path), "server": asdict(self.path.server)},
                "steps": [s.to_dict() for s in self.steps], "error": self.error,
                "first_limit": None if hit is None else {
                    "concurrency": hit[0].concurrency, "limits": [asdict(x) for x in hit[1]]}}
