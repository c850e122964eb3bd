"""A load step through Locust: one master and N local workers, headless, with the shipped
locustfile (labs/load/locustfile.py); their aggregated stats become a `StepResult`, so the same
analysis and report read Locust's numbers.

From Locust's stats (the master's JSON and failures CSV): outcomes from the `outcome: KIND`
entries, TTFT and gap percentiles (nearest rank, labs.client.results) from their response-time
histograms (Locust keeps ms, rounded to 2 significant digits above 100 ms), errors from the
failures, delivered tok/s as the streams that got tokens x 1 / the mean gap (Locust has no
per-event clock to cut a steady window with; a step whose streams ran in waves is judged by its
TTFT anyway). Client CPU is the master's and the workers' together.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from labs.findings import UnusableInput
from labs.load.evidence import tcp_counters
from labs.pathload.ramp import OwnPath, finish_step, own_limits
from labs.load.results import StepResult
from labs.load.summary import percentile_bands, ttft_histogram
from labs.client.results import percentile
from labs.client.resources import Sampler, cpu_s
from server.processes import ManagedProcess, free_port

LOCUSTFILE = Path(__file__).resolve().parents[1] / "load" / "locustfile.py"  # the Locust user of both
KIND = "SSE"


def locust_available() -> bool:
    """Whether Locust is installed, without importing it: importing locust monkey-patches this
    process for gevent (sockets, select), and the lab's own client must keep asyncio's."""
    return importlib.util.find_spec("locust") is not None


def require_locust() -> None:
    if not locust_available():
        raise UnusableInput("--locust needs Locust: pip install 'streamlab[locust]' "
                            "(make setup installs it)")


def _command(path: OwnPath, *role: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING",
            "--lab-token-env", path.settings.lab_token_env,
            "--api-key-env", path.settings.api_key_env or "", *role]


def _free_port() -> int:
    return free_port()


def spawn_plan(n: int, ramp_s: float) -> tuple[float, float]:
    """Locust's spawn rate for N starts over `ramp_s` (0: all at once), and the spread of each
    user's start. Locust's master sends floor(rate) users at once, once every floor(rate) / rate
    seconds (~1 s): each user waits a random part of that interval, so the ramp is as even as
    the lab client's instead of a burst a second."""
    if ramp_s <= 0:
        return max(n, 1) * 10.0, 0.0
    rate = n / ramp_s
    return rate, min(ramp_s, max(1, math.floor(rate)) / rate)  # as locust/dispatch.py batches


def run_locust_step(path: OwnPath, n: int, tokens_per_s: float, baseline: StepResult | None,
                    workers: int = 2) -> StepResult:
    """N streams from Locust: a master and `workers` local workers (one for a single stream)."""
    workers = max(1, min(workers, n))
    duration = path.settings.duration_s
    deadline = 3 * duration + path.settings.ramp_s + 15.0
    spawn_rate, spread = spawn_plan(n, path.settings.ramp_s)
    port = path.entry_port()
    entry = path.url[: -len("/v1")] if path.url.endswith("/v1") else path.url
    stream_path = path.completions[len(entry):]
    master_port = _free_port()
    with tempfile.TemporaryDirectory(prefix="labs-locust-") as tmp:
        prefix = os.path.join(tmp, "step")
        master_cmd = _command(path, "--master", "--headless", "--host", entry, "-u", str(n),
                              "-r", f"{spawn_rate:g}", "--expect-workers", str(workers),
                              "--master-bind-host", "127.0.0.1", "--master-bind-port",
                              str(master_port), "--run-time", f"{int(deadline + 10)}s",
                              "--stop-timeout", "5", "--stream-path", stream_path,
                              "--stream-body", json.dumps(path.body(), separators=(",", ":")),
                              "--stream-deadline", f"{deadline:g}", "--stream-spread",
                              f"{spread:g}", "--json-file", prefix,
                              "--csv", prefix, "--only-summary")
        worker_cmd = _command(path, "--worker", "--master-host", "127.0.0.1", "--master-port",
                              str(master_port))
        tcp0 = tcp_counters()
        # Managed (server.processes): stopped by PID when the step ends, raises, or a stop signal
        # ends the command, like every process the lab starts.
        processes = [ManagedProcess(f"locust-{i}", master_cmd if i == 0 else worker_cmd,
                                    Path(tmp, f"p{i}.log")) for i in range(workers + 1)]
        started, children0 = time.perf_counter(), _children_cpu_s()
        try:
            for process in processes:
                process.start()
            pids = {process.name: process.pid for process in processes}
            with Sampler(pids, ports=[port] if port else []) as sampler, PeakCpu(pids) as peak:
                _wait(processes[0], deadline + 30.0)
        finally:
            for process in processes:  # the workers leave with the master; make sure, by PID
                process.stop()
        wall = time.perf_counter() - started
        # Every process of the step has been waited for: their CPU is in RUSAGE_CHILDREN.
        client_cpu = _children_cpu_s() - children0
        stats, failures = _read_stats(prefix, tmp)
    step = step_from_stats(path.host, n, stats, failures, path.tokens(), tokens_per_s, duration,
                           wall_s=wall, client_cpu_s=client_cpu)
    finish_step(step, sampler, port, tcp0)
    step.client_peak_cpu_pct, step.client_peak_process = peak.busiest()
    step.limits = own_limits(step, baseline)
    return step


class PeakCpu:
    """The busiest second of each Locust process (% of one core): a worker is one gevent loop
    on one core, so one that reaches ~100% is Locust's own limit, whatever the total says."""

    WINDOW_S = 1.0

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids, self.peaks = dict(pids), {name: 0.0 for name in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="locust-cpu", daemon=True)

    def __enter__(self) -> PeakCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        last = {name: (time.perf_counter(), cpu_s(pid)) for name, pid in self.pids.items()}
        while not self._stop.wait(self.WINDOW_S):
            now = time.perf_counter()
            for name, pid in self.pids.items():
                used = cpu_s(pid)  # 0.0 once the process has gone: that window is skipped
                t0, used0 = last[name]
                if used > 0.0 and used >= used0:
                    self.peaks[name] = max(self.peaks[name], 100.0 * (used - used0) / (now - t0))
                last[name] = (now, used)

    def busiest(self) -> tuple[float | None, str | None]:
        if not self.peaks:
            return None, None
        name = max(self.peaks, key=lambda k: self.peaks[k])
        role = "master" if name.endswith("-0") else f"worker {name.rsplit('-', 1)[1]}"
        return round(self.peaks[name], 1), role


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wait(master: ManagedProcess, timeout_s: float) -> None:
    assert master.process is not None
    try:
        master.process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass


def _read_stats(prefix: str, tmp: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    try:
        stats = json.loads(Path(prefix + ".json").read_text())
    except (OSError, ValueError):
        logs = " | ".join(Path(tmp, f).read_text()[-400:] for f in sorted(os.listdir(tmp))
                          if f.endswith(".log"))
        raise RuntimeError(f"Locust wrote no stats: {logs}") from None
    failures: dict[str, int] = {}
    try:
        with open(prefix + "_failures.csv", newline="") as f:
            for row in csv.DictReader(f):
                if row.get("Name") == "E2E":
                    error = row.get("Error", "").split("OutcomeError(", 1)[-1].rstrip(")'\"")
                    failures[error.strip("'\"")[:120]] = int(row.get("Occurrences", 0))
    except OSError:
        pass
    return stats, failures


def _values(entry: Mapping[str, Any] | None) -> list[float]:
    """An entry's response-time histogram as a list of seconds (for nearest-rank percentiles)."""
    if not entry:
        return []
    out: list[float] = []
    for ms, count in sorted(((float(k), int(v)) for k, v in entry["response_times"].items())):
        out += [ms / 1e3] * count
    return out


def step_from_stats(host: str, n: int, stats: list[dict[str, Any]], failures: Mapping[str, int],
                    tokens: int, tokens_per_s: float, duration_s: float, *, wall_s: float,
                    client_cpu_s: float) -> StepResult:
    """Locust's aggregated stats of one step as the load lab's StepResult."""
    entries = {e["name"]: e for e in stats if e.get("method") == KIND}
    outcomes = {name.split(": ", 1)[1]: int(e["num_requests"]) for name, e in entries.items()
                if name.startswith("outcome: ")}
    missing = n - sum(outcomes.values())
    if missing > 0:  # never reported before the run ended: the step's deadline took them
        outcomes["timeout"] = outcomes.get("timeout", 0) + missing
    ttfts, gaps = _values(entries.get("TTFT")), _values(entries.get("gap"))
    mean_gap = sum(gaps) / len(gaps) if gaps else None
    delivered = len(ttfts) / mean_gap if mean_gap else 0.0
    content = int(entries["E2E"]["total_content_length"]) if "E2E" in entries else 0
    return StepResult(
        path=host, concurrency=n, tokens_per_stream=tokens, tokens_per_s=tokens_per_s,
        duration_s=duration_s, outcomes=outcomes, errors=dict(failures),
        ttft_p50_s=percentile(ttfts, 50), ttft_p99_s=percentile(ttfts, 99),
        ttft_max_s=max(ttfts) if ttfts else None, gap_p50_s=percentile(gaps, 50),
        gap_p99_s=percentile(gaps, 99), gap_max_s=max(gaps) if gaps else None,
        content_events=content, wall_s=wall_s, delivered_tok_s=delivered,
        ttft_histogram=ttft_histogram(ttfts), client_cpu_s=client_cpu_s,
        client_cpu_per_event_us=1e6 * client_cpu_s / content if content else None,
        percentile_bands_s=percentile_bands(ttfts, gaps))

