"""`--runtime docker`: the rewritten config runs in the proxy's container instead of a host process.

The run's folder is bind-mounted at its own path, so every absolute path the rewriter wrote (pid,
logs, temp files, the copied includes) means the same inside, and the kind's check and run
arguments (labs.verify.launch) are the host's; host networking keeps the loopback ports; the
container runs as the invoking user (so `user` directives are dropped) and is stopped by its id.
The image is the lab's own choice (proxies.runtime.images) for the release that runs the rewritten
config: a stand-in holds this machine's binary of that release, so the host's validator is the
same check; any other image validates in a throwaway container. Inside, the release's files are
at their native paths, so the arguments a host run of an unpacked release adds (Varnish's
vmod_path into its root) are left out.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Mapping, Sequence

from labs.findings import UnusableInput
from labs.verify.rewrite import Rewritten
from proxies.kinds import KINDS
from proxies.runtime import containers
from proxies.runtime.dockercli import DockerError, docker, host_user, require_engine
from proxies.runtime.images import Choice, ImageMissing, image_for
from server.processes import ManagedProcess


def image(rewritten: Rewritten, series: str) -> Choice:
    """The image of the proxy's release `series` (UnusableInput when there is none)."""
    try:
        require_engine()
        return image_for(rewritten.proxy, series)
    except (DockerError, ImageMissing) as exc:
        raise UnusableInput(f"--runtime docker: {exc}") from None


def _in_the_kinds_image(rewritten: Rewritten, choice: Choice, env: Mapping[str, str]) -> list[str]:
    """The run folder at its own path, the kind's variables, its binary, the image."""
    folder = str(rewritten.folder)
    return [*containers.bind(folder, folder, readonly=False),
            *containers.env_options(env),
            "--entrypoint", KINDS[rewritten.proxy].image.entrypoint, choice.image]


def check_in_container(rewritten: Rewritten, choice: Choice, check_args: Sequence[str],
                       env: Mapping[str, str]) -> tuple[int, str]:
    """Run the proxy's check-only command in a throwaway container (no network)."""
    result = docker(["run", "--rm", "--network", "none", "--user", host_user(), "--label", containers.LABEL,
                     *_in_the_kinds_image(rewritten, choice, env), *check_args], check=False, timeout=120)
    return result.returncode, result.stderr + result.stdout


@contextlib.contextmanager
def started(rewritten: Rewritten, choice: Choice, run_args: Sequence[str], env: Mapping[str, str],
            ready: Callable[[], bool], timeout_s: float) -> Iterator[ManagedProcess]:
    name = containers.container_name(f"verify-{rewritten.proxy}", rewritten.listen_port)
    args = [*containers.base_run_args(name, rewritten.proxy), *_in_the_kinds_image(rewritten, choice, env),
            *run_args]
    with containers.container(name, args, rewritten.folder, ready, timeout_s) as running:
        yield running.process
