"""The MCP origin's replicas in containers: server.mcp.replicas.running_replicas, each replica in
its own container of the mcp image, yielding the same Replicas handle.

The image (`make images-offline`, or `python -m proxies.runtime.offline_images mcp`) mounts the
interpreter prefix, the repository and each SDK line's venv read-only at their host paths, so a
replica runs this checkout's server/mcp on the same Python and the same `mcp` as a host process
would (server.mcp.sdks: 2.3 in the lab's venv, 1.30 in .venvs/mcp1). Host networking: each binds
its 127.0.0.1 port as the host process does; each is stopped by container id however the body ends.
"""
from __future__ import annotations

import contextlib
import functools
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from proxies.runtime.containers import base_run_args, bind, container, container_name
from proxies.runtime.dockercli import engine_problem, require_engine
from proxies.runtime.images import ImageMissing, image_for, offline_server_built_here, offline_server_labels
from server.mcp.knobs import OriginKnobs
from server.mcp.replicas import HOST, Replicas, check_request, healthy, replica_args
from server.mcp.sdks import DEFAULT_SDK, SDK_LINES
from server.processes import free_port

# A cold container start on two shared cores took seconds, not the local process's one (the
# engine, then the SDK's imports from the mounted venv).
READY_TIMEOUT_S = 90.0


def replica_run_args(image: str, name: str, sdk: str, args: Sequence[str]) -> list[str]:
    """`docker run` arguments for one replica: the SDK line's interpreter (its host path, mounted)
    running `args` (server.mcp.replicas.replica_args) in the checkout, as the host process does.
    ImageMissing when the image was built for another checkout or without that SDK line."""
    labels = offline_server_labels(image)
    if not offline_server_built_here(image):  # it would run another checkout's code
        raise ImageMissing(_built_elsewhere(image))
    python = str(SDK_LINES[sdk].python)
    if f"{sdk}={python}" not in labels.get("streamlab.sdks", "").split(","):  # offline_images.mcp_rootfs
        raise ImageMissing(f"{image} carries no mcp {sdk} (built before `labs setup` installed it): "
                           f"run `python -m proxies.runtime.offline_images mcp`")
    run = [*base_run_args(name, "mcp"), "--tmpfs", "/tmp:mode=1777", "--env", "HOME=/tmp",
           "--env", "PYTHONDONTWRITEBYTECODE=1", "--env", "PYTHONUNBUFFERED=1"]
    for folder in labels.get("streamlab.mounts", "").split(":"):
        if folder:
            run += bind(folder, folder)
    repo = Path(__file__).resolve().parents[2]
    return [*run, "--workdir", str(repo), "--entrypoint", python, image, *args]


def image_problem() -> str | None:
    """Why no replica could start in a container here (one line: no engine, no mcp image, one built
    for another checkout), None when one can."""
    if (problem := engine_problem()) is not None:
        return problem
    try:
        image = image_for("mcp").image
    except ImageMissing as exc:
        return str(exc)
    return None if offline_server_built_here(image) else _built_elsewhere(image)


def _built_elsewhere(image: str) -> str:
    return f"{image} was built for another checkout: run `python -m proxies.runtime.offline_images mcp` here"


@contextlib.contextmanager
def running_replicas(count: int, knobs: OriginKnobs = OriginKnobs(), *, sdk: str = DEFAULT_SDK,
                     ready_timeout_s: float = READY_TIMEOUT_S) -> Iterator[Replicas]:
    """`count` replicas (numbers 0..count-1), each in its container, each ready (its health path
    polled); yields them; stops every container however the body ends."""
    check_request(count, sdk)
    require_engine()
    image = image_for("mcp").image
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="streamlab-mcp-docker-")))
        ports, processes = [], []
        for replica in range(count):
            port = free_port(HOST)
            name = container_name("mcp", port)
            workdir = folder / f"replica-{replica}"  # its process.log and container id
            workdir.mkdir()
            run = replica_run_args(image, name, sdk, replica_args(knobs, replica, port))
            started = stack.enter_context(container(name, run, workdir, functools.partial(healthy, port),
                                                    ready_timeout_s))
            ports.append(port)
            processes.append(started.process)
        yield Replicas(ports=ports, processes=processes, knobs=knobs)
