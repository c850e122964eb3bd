"""`--runtime docker`: the rewritten config runs in the proxy's container instead of a host process.

The run's folder is bind-mounted at its own path, so every absolute path the rewriter wrote (pid,
logs, temp files, the copied includes) means the same inside; host networking keeps the loopback
ports; the container runs as the invoking user (so `user` directives are dropped) and is stopped by
its id. The image is the lab's own choice (proxies.runtime.images): an offline image holds the host's
binary, so the host's validator is the same check; any other image validates in a throwaway
container.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from labs.findings import UnusableInput
from labs.verify.rewrite import Rewritten
from proxies.runtime import docker as containers
from proxies.runtime.dockercli import DockerError, docker, host_user, require_engine
from proxies.runtime.images import Choice, ImageMissing, image_for
from proxies.runtime.local import foreground_args
from server.processes import ManagedProcess


def image(rewritten: Rewritten) -> Choice:
    try:
        require_engine()
        return image_for(rewritten.proxy)  # type: ignore[arg-type]
    except (DockerError, ImageMissing) as exc:
        raise UnusableInput(f"--runtime docker: {exc}") from None


def check_in_container(rewritten: Rewritten, choice: Choice, check_args: list[str]) -> tuple[int, str]:
    """Run the proxy's check-only command in a throwaway container (no network)."""
    folder = str(rewritten.folder)
    result = docker(["run", "--rm", "--network", "none", "--user", host_user(), "--label", containers.LABEL,
                     *containers.bind(folder, folder, readonly=False), "--entrypoint", rewritten.proxy,
                     choice.image, *check_args], check=False, timeout=120)
    return result.returncode, result.stderr + result.stdout


@contextlib.contextmanager
def started(rewritten: Rewritten, choice: Choice, ready: Callable[[], bool],
            timeout_s: float) -> Iterator[ManagedProcess]:
    folder = str(rewritten.folder)
    name = containers.container_name(f"verify-{rewritten.proxy}", rewritten.listen_port)
    args = [*containers.base_run_args(name, rewritten.proxy), *containers.bind(folder, folder, readonly=False),
            "--entrypoint", rewritten.proxy, choice.image,
            *foreground_args(rewritten.proxy, str(rewritten.main), f"{folder}/")]  # type: ignore[arg-type]
    with containers.container(name, args, rewritten.folder, ready, timeout_s) as running:
        yield running.process
