"""The runtimes the tests run proxies in, and what tests in both tests/proxies and tests/docker need.

`RUNTIMES` parametrizes a fixture over `local` (host processes) and `docker` (containers). The
docker case is marked `docker`, and `require_docker` skips it saying why when no engine (or no
image) can be had, except under CI (`CI=true`), where the container pass is required and a
missing engine is a failure instead.
"""
from __future__ import annotations

import asyncio
import os
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Mapping

import pytest

from labs.client import measure_stream
from labs.client.results import StreamResult
from proxies import ProxySettings
from proxies.kinds import PROXY_NAMES
from proxies.base import ProxyName
from proxies.runtime.docker import DockerProxy
from proxies.runtime.dockercli import docker, engine_problem
from proxies.runtime.images import ImageMissing, image_for
from proxies.runtime.local import LocalProxy
from server.processes import free_port, port_accepts, wait_until

PROXIES: tuple[ProxyName, ...] = PROXY_NAMES
# The proxies docker/compose.yaml runs: every one.
COMPOSE_PROXIES: tuple[ProxyName, ...] = PROXIES

RUNTIMES = [
    pytest.param("local", id="local"),
    # `-m docker` / `-m "not docker"` select the container pass, as for the tests in tests/docker.
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def unavailable(reason: str) -> None:
    """Skip with the reason; under CI the container pass is required, so fail instead."""
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true requires the container tests, but {reason}", pytrace=False)
    pytest.skip(reason)


def require_engine() -> None:
    problem = engine_problem()
    if problem:
        unavailable(problem)


def require_images(services: Iterable[str], releases: Mapping[str, str] | None = None) -> dict[str, str]:
    """The image each service runs in (a proxy: of its release in `releases`, proxy -> series,
    else its current one; official where present or pullable, else the offline stand-in); a
    missing one skips, or fails under CI, with the line that says what to run."""
    require_engine()
    releases = releases or {}
    try:
        return {service: image_for(service, releases.get(service)).image  # type: ignore[arg-type]
                for service in services}
    except ImageMissing as exc:
        unavailable(str(exc))
        raise


# ---- helpers for the proxies' runtime checks -----------------------------------------------------

def on_free_ports(settings: ProxySettings, upstream_port: int) -> ProxySettings:
    changes: dict[str, int] = {"listen_port": free_port(), "upstream_port": upstream_port}
    if settings.proxy == "envoy":
        changes["admin_port"] = free_port()
    return settings.with_(**changes)


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        response.read()
        return response.status


def group_members(pgid: int) -> list[int]:
    """PIDs whose process group is `pgid` (nginx workers, anything the proxy forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def container_exists(proxy: DockerProxy) -> bool:
    assert proxy.container is not None
    listed = docker(["ps", "--all", "--quiet", "--no-trunc", "--filter", f"name={proxy.container.name}"])
    return bool(listed.stdout.strip())


def assert_running(proxy: LocalProxy) -> None:
    """What each runtime hands back while the proxy runs: its own process group, or a container."""
    # DockerProxy is a LocalProxy (it reads the same log files), so it is asked about first.
    if isinstance(proxy, DockerProxy):
        assert proxy.pid > 0 and len(proxy.container_id) == 64 and container_exists(proxy)
    else:
        assert proxy.pid > 0 and os.getpgid(proxy.pid) == proxy.pid  # stopped as one group


GONE_WITHIN_S = 2.0


def assert_gone(proxy: LocalProxy) -> None:
    """Nothing left behind: the process (the attached `docker run` client) reaped, its process
    group or container gone, the port free."""
    assert proxy.process.process is not None and proxy.process.process.poll() is not None
    if isinstance(proxy, DockerProxy):
        assert not container_exists(proxy)
    else:
        # SIGKILLed workers of a dead master take a moment to exit on a busy machine: polled.
        try:
            wait_until(lambda: group_members(proxy.pid) == [], GONE_WITHIN_S, describe="the process group to exit")
        except TimeoutError:
            pass
        assert group_members(proxy.pid) == []
    assert not port_accepts(proxy.settings.listen_port)


def stream(url: str, body: Mapping[str, Any] | bytes | None = None, **options: Any) -> StreamResult:
    """One stream measured by the lab's own client (every socket read numbered), from sync code.
    `body` defaults to a minimal chat request (the fake upstream reads its knobs from the URL)."""
    body = body if body is not None else {"model": "tiny", "stream": True, "messages": []}
    options.setdefault("total_timeout_s", 60.0)
    return asyncio.run(measure_stream(url, body, **options))


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (a container's init and the proxy it started)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def listening_tcp_ports(pid: int) -> set[int]:
    """The TCP ports (IPv4 and IPv6) that `pid` or a process below it listens on."""
    inodes: set[str] = set()
    for member in descendants(pid):
        try:
            links = [os.readlink(f) for f in Path(f"/proc/{member}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows, None)  # header
            for cols in (line.split() for line in rows):
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports
