"""The server's Prometheus metrics (served on GET /metrics). Names are fixed by the contract.

One registry per process: labs and tests start a server per process, never two in one. Under
`--workers N` (server/workers.py) every worker writes its values to the shared
PROMETHEUS_MULTIPROC_DIR and `exposition()` reads them all: the gauges are live sums.
"""
from __future__ import annotations

import gc
import os
import time
from typing import Any, Callable

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector,
                               generate_latest, multiprocess)

REGISTRY = CollectorRegistry(auto_describe=True)

ACTIVE_STREAMS = Gauge(
    "streamlab_active_streams", "Responses being streamed now", registry=REGISTRY,
    multiprocess_mode="livesum")
QUEUED_REQUESTS = Gauge(
    "streamlab_queued_requests", "Requests waiting for a slot", registry=REGISTRY,
    multiprocess_mode="livesum")
SLOTS_IN_USE = Gauge(
    "streamlab_slots_in_use", "Sequences the engine holds (the KV-cache slots)", registry=REGISTRY,
    multiprocess_mode="livesum")
SLOTS_TOTAL = Gauge(
    "streamlab_slots_total", "Slots the engine has", registry=REGISTRY,
    multiprocess_mode="livesum")
TOKENS_GENERATED = Counter(
    "streamlab_tokens_generated", "Tokens the engine produced", registry=REGISTRY)
TOKENS_AFTER_DISCONNECT = Counter(
    "streamlab_tokens_after_disconnect", "Tokens produced after the client had gone",
    registry=REGISTRY)
REQUESTS_ABORTED = Counter(
    "streamlab_requests_aborted", "Requests ended early, by reason", ["reason"], registry=REGISTRY)
INBAND_ERRORS = Counter(
    "streamlab_inband_errors", "Errors sent in-band after the first byte", registry=REGISTRY)
REQUESTS = Counter(
    "streamlab_requests", "Completion requests (every protocol), by HTTP status", ["status"], registry=REGISTRY)
# By protocol and mode: a client that retries a stream without streaming (Claude Code behind a hop
# that drops `event:` lines) shows as one stream and one non-stream request per question.
API_REQUESTS = Counter(
    "streamlab_api_requests", "Requests admitted to the engine, by protocol (chat, responses, "
    "messages) and mode (stream true or false)", ["api", "stream"], registry=REGISTRY)
_api_children: dict[tuple[str, bool], Any] = {}


def count_api_request(api: str, stream: bool) -> None:
    """One admitted request in API_REQUESTS (its labelled child looked up once per pair)."""
    child = _api_children.get((api, stream))
    if child is None:
        child = _api_children[(api, stream)] = API_REQUESTS.labels(
            api=api, stream="true" if stream else "false")
    child.inc()


SLOT_HELD_AFTER_DISCONNECT = Histogram(
    "streamlab_slot_held_after_disconnect_seconds",
    "Time a slot stayed busy after its client had gone",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY)
TIME_TO_FIRST_TOKEN = Histogram(
    "streamlab_time_to_first_token_seconds", "From request arrival to the first content token sent",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=REGISTRY)

# The stream's own counters (server/stream/sse_writer.py), for the coalescing and heartbeat labs.
STREAM_WRITES = Counter(
    "streamlab_stream_writes", "Body writes of streaming responses (one send, one write syscall)",
    registry=REGISTRY)
SSE_FRAMES = Counter(
    "streamlab_sse_frames", "SSE frames written (data events and comments); frames / writes > 1 "
    "means writes were coalesced", registry=REGISTRY)
HEARTBEATS = Counter(
    "streamlab_heartbeats", "SSE comment heartbeats (`: ping`) sent after silence", registry=REGISTRY)

# process_cpu_seconds_total, process_open_fds, process_max_fds (the soft RLIMIT_NOFILE in force),
# process_resident_memory_bytes...: server CPU per token for `server-coalescing`, descriptors
# for `server-fd-limit`, read from /proc by the collector on each scrape.
ProcessCollector(registry=REGISTRY)
HTTP_CONNECTIONS = Counter(
    "streamlab_http_connections", "TCP connections the server accepted (one per upstream "
    "connection a proxy opens)", registry=REGISTRY)
# The cyclic garbage collector stops the whole process (the event loop, every stream) for each
# pass, and no profiler frame shows it: its time lands on whatever frame allocated last. Timed
# here, it is what server/__main__.py's GC settings and a completion's freedom from reference
# cycles are measured by (python -m labs.bench.profile reads it).
GC_PAUSES = Histogram(
    "streamlab_gc_pause_seconds", "Passes of the cyclic garbage collector (the process stops for "
    "each), by generation", ["generation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1), registry=REGISTRY)


def time_collector_passes() -> Callable[[str, dict[str, Any]], None]:
    """Observe every pass of the cyclic collector in GC_PAUSES (the server process, once);
    returns the callback installed in gc.callbacks."""
    started = [0.0]
    children = {generation: GC_PAUSES.labels(generation=str(generation)) for generation in range(3)}

    def on_pass(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            children[info["generation"]].observe(time.perf_counter() - started[0])
    gc.callbacks.append(on_pass)
    return on_pass


def exposition() -> bytes:
    """The text of GET /metrics: this process's registry, or every worker's under --workers."""
    shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not shared:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=shared)
    return generate_latest(registry)
