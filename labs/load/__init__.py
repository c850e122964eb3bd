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

One module per job:

    paths     the paths and their steps (LoadPath, ServerSpec, PATHS), the scripted text
    results   StepResult, Limit, and the thresholds of "healthy"
    analysis  diagnose, first_limit: which limit an unhealthy step hit; PathResult
    evidence  what a step left in logs and counters (server, proxy, Envoy, the kernel's TCP)
    summary   a step's streams in numbers: percentiles, the steady rate, the TTFT histogram
    lab       LoadLab: servers, proxies and steps, with their resources sampled
    cli       `python -m labs.load` (and `python -m labs run load`), --reanalyse
    report    tables, report.json, report.md and the picture (imported on use: matplotlib)
    locustfile  the Locust user (also for `locust --master` / `--worker` across machines)

A step's streams are the measuring client's stream driver (labs/client/driver.py).

The same steps against a deployed path given by its URL (`python -m labs load URL`) are
labs/pathload/.
"""
from __future__ import annotations

from labs.load.analysis import PathResult, diagnose, first_limit
from labs.load.cli import main, reanalyse
from labs.load.evidence import tcp_counters
from labs.load.paths import PATHS, SYNTHETIC, LoadPath, ServerSpec, get_path, script
from labs.load.results import MAX_GAP_FACTOR, MAX_TTFT_P99_S, MIN_RATE_PCT, Limit, StepResult
from labs.load.lab import LoadLab
from labs.load.summary import steady_gaps, steady_rate, steady_window, summarize, ttft_histogram

__all__ = [
    "MAX_GAP_FACTOR", "MAX_TTFT_P99_S", "MIN_RATE_PCT", "PATHS", "SYNTHETIC", "Limit", "LoadLab",
    "LoadPath", "PathResult", "ServerSpec", "StepResult", "diagnose", "first_limit", "get_path",
    "main", "reanalyse", "script", "steady_gaps", "steady_rate", "steady_window", "summarize",
    "tcp_counters", "ttft_histogram",
]
