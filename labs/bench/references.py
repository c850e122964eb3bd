"""The reference servers the benchmark measures beside the lab's server, with the same client and
the same streams in the same run: what this machine allows before any lab feature.

* plain FastAPI (labs/bench/plain_server.py): an async generator of json.dumps chunks in a
  StreamingResponse, as most OpenAI-compatible demos are written; same uvicorn and uvloop;
* raw ASGI on uvicorn (labs/bench/stack_floors.py): an ASGI callable with no framework on the
  lab server's own HTTP stack: the least any app on it can cost, the floor the targets are read
  against;
* bare asyncio (labs/bench/measuring_client.py's server): uvloop streams, no HTTP library, no
  framework; one write per event (the floor of issue 27's targets, below the stack's own);
* httptools protocol (labs/bench/stack_floors.py): httptools' parser under an asyncio protocol,
  without uvicorn: the floor of an HTTP layer of one's own.

The last three send the same stream (labs/bench/reference_stream.py), the lab server's in shape.
"""
from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import urlsplit

from labs.bench.measuring_client import bare_server_process
from labs.client.driver import no_gc_pauses, streams_at_once, uvloop_runner
from labs.client.results import percentile
from labs.client.resources import Sampler

PLAIN, RAW_ASGI, BARE, HTTPTOOLS = ("plain FastAPI", "raw ASGI on uvicorn", "bare asyncio",
                                    "httptools protocol")
REFERENCES = (PLAIN, RAW_ASGI, BARE, HTTPTOOLS)  # the order `references()` measures them in
# Those answering labs/bench/reference_stream.py's body: {"n": events, "interval": seconds}.
_EVENTS_BODY = (RAW_ASGI, BARE, HTTPTOOLS)


@contextlib.contextmanager
def module_server(name: str, module: str, *args: str) -> Iterator[tuple[str, int]]:
    """`python -m module --port N *args` in its own process: its chat-completions URL and PID."""
    from server.processes import ManagedProcess, free_port, managed, port_accepts

    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    process = ManagedProcess(name, [sys.executable, "-m", module, "--port", str(port), *args],
                             folder / "server.log")
    with managed(process, lambda: port_accepts(port)) as started:
        yield f"http://127.0.0.1:{port}/v1/chat/completions", started.pid


@contextlib.contextmanager
def references() -> Iterator[dict[str, tuple[str, int]]]:
    """Every reference server, started once: name -> (URL, PID), heaviest first."""
    with module_server("plain-fastapi", "labs.bench.plain_server") as plain, \
            module_server("raw-asgi", "labs.bench.stack_floors", "--stack", "uvicorn") as raw, \
            bare_server_process() as bare, \
            module_server("httptools", "labs.bench.stack_floors", "--stack", "httptools") as floor:
        yield dict(zip(REFERENCES, (plain, raw, bare, floor)))


def reference_body(name: str, lab_body: Mapping[str, Any]) -> Mapping[str, Any]:
    """What `name` needs to send the streams `lab_body` asks the lab's server for."""
    if name in _EVENTS_BODY:
        lab = lab_body.get("lab") or {}
        return {"n": int(lab_body["max_tokens"]), "interval": 1.0 / float(lab.get("tokens_per_s") or 20.0)}
    return lab_body


def measure(url: str, pid: int, body: Mapping[str, Any], streams: int, deadline_s: float) -> dict[str, Any]:
    """`streams` streams at once against one reference server: TTFT, gaps, its CPU, the client's."""
    # Sampled as LoadLab.run_step samples the lab's server, its listening port included: reading
    # /proc/net/tcp (thousands of TIME_WAIT lines after a few bursts) every 0.25 s costs the
    # client's process enough to move a burst's p99 by ~80 ms (measured), so both sides pay it.
    with (Sampler({"server": pid}, ports=[urlsplit(url).port or 80]) as sampler,
          uvloop_runner() as runner, no_gc_pauses()):
        batch = runner.run(streams_at_once(url, body, streams, deadline_s))
    ttfts = [r.ttft_s for r in batch.results if r.ttft_s is not None]
    gaps = [g for r in batch.results for g in r.gaps]
    events = sum(r.content_events for r in batch.results)
    return {"ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
            "ttft_max_s": max(ttfts) if ttfts else None, "gap_p99_s": percentile(gaps, 99),
            "events": events, "server_cpu_s": sampler.usage["server"].cpu_s,
            "client_cpu_s": batch.client_cpu_s, "machine_busy_pct": sampler.machine_busy_pct,
            "failed": sum(r.outcome != "complete" for r in batch.results)}
