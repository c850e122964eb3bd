"""Several MCP origin processes on one machine, each on its own free loopback port, each stopped
by PID (server.processes), as a deployment's replicas behind one load balancer.

    with running_replicas(2, OriginKnobs()) as replicas:
        replicas.ports          # [41231, 41232]
        replicas.requests()     # every request each one recorded, with its replica number
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from server.locations import checkout
from server.mcp.app import HEALTH_PATH, MCP_PATH, RECORDS_PATH
from server.mcp.knobs import OriginKnobs
from server.mcp.sdks import DEFAULT_SDK, SDK_LINES
from server.processes import ManagedProcess, free_port, managed

HOST = "127.0.0.1"


@dataclass
class Replicas:
    """The running replicas: replica i listens on ports[i]."""

    ports: list[int]
    processes: list[ManagedProcess]
    knobs: OriginKnobs

    def url(self, replica: int = 0) -> str:
        return f"http://{HOST}:{self.ports[replica]}{MCP_PATH}"

    def requests(self) -> list[dict[str, Any]]:
        """Every request each replica recorded (its `replica` field says which), by time."""
        records: list[dict[str, Any]] = []
        for port in self.ports:
            with urllib.request.urlopen(f"http://{HOST}:{port}{RECORDS_PATH}", timeout=5) as response:
                records += json.loads(response.read())
        return sorted(records, key=lambda record: record["at"])

    def command(self) -> str:
        """The command line each replica runs (its port and number aside), for a report."""
        return " ".join(["python -m server.mcp", *self.knobs.argv()])


def replica_args(knobs: OriginKnobs, replica: int, port: int) -> list[str]:
    """The arguments after the interpreter that start replica number `replica` on `port`, in either
    runtime (proxies.runtime.docker_mcp runs the same line in a container)."""
    own = dataclasses.replace(knobs, replica=replica)
    return ["-m", "server.mcp", "--host", HOST, "--port", str(port), *own.argv()]


def check_request(count: int, sdk: str) -> None:
    """ValueError unless `count` replicas of the SDK line `sdk` can be started."""
    if count < 1 or sdk not in SDK_LINES:
        raise ValueError(f"at least one replica, on one of the SDK lines {sorted(SDK_LINES)}")


def healthy(port: int) -> bool:
    """Whether the replica on `port` answers its health path (readiness, polled)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{HEALTH_PATH}", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def running_replicas(count: int, knobs: OriginKnobs = OriginKnobs(), *, sdk: str = DEFAULT_SDK,
                     ready_timeout_s: float = 60.0) -> Iterator[Replicas]:
    """Start `count` origin processes (replica numbers 0..count-1) on the SDK line `sdk` (a key of
    server.mcp.sdks.SDK_LINES), wait until each answers, yield them, and stop every one of them
    however the body ends."""
    check_request(count, sdk)
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="streamlab-mcp-")))
        ports, processes = [], []
        for replica in range(count):
            port = free_port(HOST)
            process = ManagedProcess(
                name=f"mcp-origin:{port}", argv=[str(SDK_LINES[sdk].python), *replica_args(knobs, replica, port)],
                log_path=folder / f"replica-{replica}.log", cwd=checkout() or folder)
            processes.append(stack.enter_context(managed(process, functools.partial(healthy, port),
                                                         ready_timeout_s)))
            ports.append(port)
        yield Replicas(ports=ports, processes=processes, knobs=knobs)
