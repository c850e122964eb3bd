"""`--workers N`: N processes on one port, one engine each, /metrics summed across them."""
from __future__ import annotations

import os
import socket

import httpx
import pytest

from server.launcher import running_server
from server.processes import wait_until
from server.workers import reuse_port_socket, worker_argv

BODY = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
        "max_tokens": 3}


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                found.append(int(entry))
    return found


def test_two_workers_share_the_port_and_sum_their_metrics(model_dir) -> None:
    with running_server(["--engine", "synthetic", "--workers", "2", "--slots", "3"]) as server:
        workers = children(server.process.pid)
        assert len(workers) == 2
        # Fresh connections: the kernel spreads them over both workers' sockets.
        for _ in range(20):
            with httpx.Client(base_url=server.url, timeout=10) as client:
                reply = client.post("/v1/chat/completions", json=BODY)
                assert reply.status_code == 200 and reply.text.rstrip().endswith("data: [DONE]")
        samples = server.metrics()
        assert samples['streamlab_requests_total{status="200"}'] == 20
        assert samples["streamlab_slots_total"] == 6  # 3 per worker, summed
        assert samples["streamlab_tokens_generated_total"] == 60
    wait_until(lambda: not any(alive(pid) for pid in workers), 10, describe="the workers' exit")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_supervisor_refuses_a_port_another_server_listens_on() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            reuse_port_socket("127.0.0.1", taken.getsockname()[1]).close()


def test_a_worker_gets_the_same_flags_with_the_held_port() -> None:
    argv = worker_argv(["--engine", "synthetic", "--workers", "4", "--port=0", "--slots", "9"], 8123)
    assert argv[3:] == ["--engine", "synthetic", "--slots", "9", "--port", "8123", "--workers", "1",
                        "--reuse-port"]
