"""`python -m server --workers N`: N server processes on one port, each with its own engine.

    python -m server --engine synthetic --workers 2 --port 8001

The parent is a small supervisor: it holds the port (a bound, never listening SO_REUSEPORT
socket, so `--port 0` and a busy port fail before any worker starts), then starts N copies of
itself with `--reuse-port`, each binding the same port with SO_REUSEPORT; the kernel spreads new
connections across the workers' listening sockets. Each worker has its own event loop, engine,
slots (`--slots` is per worker) and queue. Metrics are aggregated with prometheus_client's
multiprocess mode: the supervisor gives every worker one PROMETHEUS_MULTIPROC_DIR, and whichever
worker answers GET /metrics reads every worker's counters, histograms and gauges (the gauges
are live sums: slots, streams, queue). Not aggregated: the `process_*` metrics (one process's
view; the supervisor's own `/proc` children are the whole server's CPU) and request records
(`GET /lab/requests/{id}` is answered by the worker that served the request, or 404 by another).

When it helps (measured: docs/benchmarks.md, `make bench`'s admission part): a burst of arrivals
is admitted by one event loop per worker, so admission runs on as many cores as are free. On
this 2-core machine with the measuring client on the same cores, two workers compete with the
client for the second core: see the benchmark's figures for what that gives here.

A worker that exits ends the server: the supervisor stops the others and exits with the
worker's code (3 when its engine died), so a supervisor above restarts the whole.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Sequence

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
STOP_GRACE_S = 8.0  # a worker's own graceful shutdown is 5 s (uvicorn's timeout_graceful_shutdown)


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port with SO_REUSEPORT, not listening (uvicorn listens once the
    app has started, so no connection waits on a worker that is still loading)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def worker_argv(argv: Sequence[str], port: int) -> list[str]:
    """The command line of one worker: the same flags, one worker, the held port, --reuse-port."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--workers", "--port"):
            skip = True
            continue
        if arg.startswith(("--workers=", "--port=")):
            continue
        out.append(arg)
    return [sys.executable, "-m", "server", *out, "--port", str(port), "--workers", "1",
            "--reuse-port"]


def supervise(argv: Sequence[str], host: str, port: int, workers: int) -> int:
    try:
        held = reuse_port_socket(host, port)
    except OSError as exc:
        print(f"python -m server: cannot bind {host}:{port}: {exc}", file=sys.stderr)
        return 2
    port = held.getsockname()[1]
    metrics_dir = tempfile.mkdtemp(prefix="streamlab-metrics-")
    env = {**os.environ, MULTIPROC_ENV: metrics_dir}
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    code = 0
    try:
        children = [subprocess.Popen(worker_argv(argv, port), env=env) for _ in range(workers)]
        print(f"python -m server: {workers} workers on http://{host}:{port} (pids "
              f"{', '.join(str(c.pid) for c in children)})", file=sys.stderr, flush=True)
        while not stopping:
            ended = [c for c in children if c.poll() is not None]
            if ended:
                code = ended[0].returncode or 0
                print(f"python -m server: worker {ended[0].pid} exited with {code}: stopping the "
                      "others", file=sys.stderr, flush=True)
                break
            time.sleep(0.1)  # poll interval of the supervisor; it has nothing else to do
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        held.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
    return code
