"""Containers as the Docker runtime starts them, whatever runs inside (a proxy, the model server,
an app hop): one name per container, the `docker run` options every one gets, bind mounts, and
an attached `docker run` client stopped by container id even when the body raises.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from proxies.runtime.dockercli import DockerError, docker, docker_bin, host_user
from proxies.logs import PROCESS_LOG
from server import signals
from server.processes import ManagedProcess, ProcessFailed

CONFIG_DIR = "/etc/streamlab"  # a proxy's config, read-only
PREFIX = "/var/lib/streamlab"  # a proxy's prefix: pid, logs and work files (the mounted work folder)
LABEL = "streamlab"  # every container carries it: `docker ps --filter label=streamlab`
STOP_TIMEOUT_S = 5  # SIGTERM through --init, SIGKILL after this


def container_name(kind: str, port: int) -> str:
    """Unique across processes and machines sharing an engine: kind, port, our PID, 6 random hex."""
    return f"streamlab-{kind}-{port}-{os.getpid()}-{secrets.token_hex(3)}"


def base_run_args(name: str, kind: str) -> list[str]:
    """`docker run` options every streamlab container gets."""
    return ["run", "--rm", "--init", "--name", name,
            # Host networking: the process binds 127.0.0.1:PORT as on the host, no port mapping,
            # no bridge (the engine here runs with --bridge=none).
            "--network", "host",
            # Official images set other stop signals (HAProxy's SIGUSR1 waits for streams to end).
            "--stop-signal", "SIGTERM", "--stop-timeout", str(STOP_TIMEOUT_S),
            # Files written into bind mounts (nginx's logs) belong to whoever runs the lab.
            "--user", host_user(),
            "--label", LABEL, "--label", f"{LABEL}.kind={kind}", "--label", f"{LABEL}.pid={os.getpid()}"]


def env_options(env: Mapping[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]


def bind(source: Path | str, target: str, readonly: bool = True) -> list[str]:
    spec = f"type=bind,source={source},target={target}"
    return ["--mount", spec + (",readonly" if readonly else "")]


@dataclass
class Container:
    """A container started by an attached `docker run` client (a ManagedProcess)."""

    name: str
    cidfile: Path
    process: ManagedProcess
    id: str = ""

    def read_id(self) -> str:
        with contextlib.suppress(FileNotFoundError):
            self.id = self.cidfile.read_text().strip()
        return self.id

    def host_pid(self) -> int:
        """The PID, on the host, of the container's first process (docker-init)."""
        result = docker(["inspect", "--format", "{{.State.Pid}}", self.read_id() or self.name], check=False)
        return int(result.stdout.strip() or 0) if result.returncode == 0 else 0

    def stop(self) -> None:
        """Stop by id (SIGTERM via --init, so milliseconds), reap the client, make sure it is gone.
        A stop signal does not cut it short (server.signals.held): it is raised once it is done."""
        with signals.held():
            target = self.read_id() or self.name
            with contextlib.suppress(DockerError, OSError):
                docker(["stop", "--time", str(STOP_TIMEOUT_S), target], check=False, timeout=STOP_TIMEOUT_S + 30)
            self.process.stop(grace_s=STOP_TIMEOUT_S)
            # --rm removes it once stopped; a client killed early can leave one behind.
            with contextlib.suppress(DockerError, OSError):
                docker(["rm", "--force", target], check=False, timeout=30)


@contextlib.contextmanager
def container(name: str, run_args: Sequence[str], workdir: Path, ready: Callable[[], bool],
              timeout_s: float) -> Iterator[Container]:
    """Start `docker run RUN_ARGS` attached (output -> workdir/process.log), poll `ready`, yield,
    and stop the container by id even when starting or the body fails."""
    cidfile = workdir / "container.id"
    cidfile.unlink(missing_ok=True)  # docker refuses to overwrite a cidfile
    # run_args[0] is "run": --cidfile goes right after it.
    argv = [docker_bin(), run_args[0], "--cidfile", str(cidfile), *run_args[1:]]
    process = ManagedProcess(name=name, argv=argv, log_path=workdir / PROCESS_LOG, cwd=workdir)
    handle = Container(name=name, cidfile=cidfile, process=process)
    token = None
    try:
        with signals.held():  # tracked by id as soon as its client runs (the container outlives it)
            process.start()
            token = signals.track(handle.stop)
        try:
            process.wait_ready(ready, timeout_s)
        except ProcessFailed as exc:
            raise ProcessFailed(f"container {name}: {exc}") from None
        handle.read_id()
        yield handle
    finally:
        try:
            handle.stop()
        finally:
            if token is not None:
                signals.untrack(token)


def stop_leftovers() -> list[str]:
    """Remove the runtime's containers whose owner process is gone (a run killed with SIGKILL).

    Compose stacks carry the label but no owner PID: `docker compose down` is theirs to run.
    """
    listed = docker(["ps", "--all", "--filter", f"label={LABEL}.pid", "--format",
                     f'{{{{.ID}}}} {{{{.Label "{LABEL}.pid"}}}}'], check=False).stdout
    removed = []
    for line in listed.splitlines():
        cid, _, pid = line.partition(" ")
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        docker(["rm", "--force", cid], check=False)
        removed.append(cid)
    return removed
