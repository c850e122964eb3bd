"""The few Docker CLI calls the container runtime needs, and one clear answer to "is there an engine?".

Only the `docker` CLI is used (no Python SDK): it works the same against any engine version, and
it is what a user types when something needs a closer look.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import lru_cache
from typing import Any, Sequence


class DockerUnavailable(RuntimeError):
    """No docker CLI, or no engine answering it; the message says which and what to do."""


class DockerError(RuntimeError):
    """A docker command failed; the message carries the command and docker's own words."""


def docker_bin() -> str:
    """The docker CLI (DOCKER env var first, so a user can point at another client)."""
    found = os.environ.get("DOCKER") or shutil.which("docker")
    if not found:
        raise DockerUnavailable(
            "no `docker` CLI on PATH: install Docker (or `make docker-setup` on Debian as root)")
    return found


def docker(args: Sequence[str], *, check: bool = True, timeout: float = 120.0,
           capture: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS`; raise DockerError with docker's message when it fails and `check`."""
    argv = [docker_bin(), *args]
    result = subprocess.run(argv, capture_output=capture, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        said = ((result.stderr or "") + (result.stdout or "")).strip()
        raise DockerError(f"`docker {' '.join(args)}` failed (status {result.returncode}): {said}")
    return result


@lru_cache(maxsize=1)
def engine_problem() -> str | None:
    """None when an engine answers `docker info`; otherwise why not, in one line (cached)."""
    try:
        result = docker(["info", "--format", "{{.ServerVersion}}"], check=False, timeout=20)
    except DockerUnavailable as exc:
        return str(exc)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 20 s: the engine is hung or unreachable"
    if result.returncode != 0 or not result.stdout.strip():
        said = (result.stderr or result.stdout).strip().splitlines()
        reason = said[-1] if said else f"exit status {result.returncode}"
        return (f"no Docker engine answers ({reason}); start one "
                f"(`make docker-setup` on Debian as root) or use LAB_RUNTIME=local")
    return None


def require_engine() -> None:
    problem = engine_problem()
    if problem:
        raise DockerUnavailable(problem)


def image_inspect(image: str) -> dict[str, Any] | None:
    """The image's inspect record if it is present locally, else None (never pulls)."""
    result = docker(["image", "inspect", image], check=False, timeout=30)
    if result.returncode != 0:
        return None
    records = json.loads(result.stdout or "[]")
    return records[0] if records else None


def image_present(image: str) -> bool:
    return image_inspect(image) is not None


def host_user() -> str:
    """`uid:gid` of this process, so files a container writes into a bind mount stay ours."""
    return f"{os.getuid()}:{os.getgid()}"
