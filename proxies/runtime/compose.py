"""docker/compose.yaml helpers: which Compose to call, and the variables the file reads.

    python -m proxies.runtime.compose command      # `docker compose` (v2) or `docker-compose` (v1)
    python -m proxies.runtime.compose files        # -f arguments: + compose.offline.yaml offline
    python -m proxies.runtime.compose env          # an --env-file for this machine (images, paths)

Compose v2 is a docker CLI plugin; Debian ships only v1 (`docker-compose` 1.29). Both read the
same file (no `version:` key, profiles, `init`), but v1 has no `up --wait`, so callers poll
readiness themselves.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

from proxies.kinds import KINDS
from proxies.runtime.dockercli import docker, docker_bin
from proxies.runtime.images import Service, image_for

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO_ROOT / "docker" / "compose.yaml"
OFFLINE_FILE = REPO_ROOT / "docker" / "compose.offline.yaml"
SERVICES: tuple[Service, ...] = ("server", *KINDS)  # docker/compose.yaml's: a test keeps them so


class ComposeUnavailable(RuntimeError):
    """Neither `docker compose` nor `docker-compose` runs here."""


@lru_cache(maxsize=1)
def compose_command() -> list[str]:
    """`docker compose` when the v2 plugin is there, else v1's `docker-compose`."""
    candidates: list[list[str]] = []
    with_env = os.environ.get("STREAMLAB_COMPOSE")  # e.g. "docker-compose", to force one
    if with_env:
        candidates.append(with_env.split())
    try:
        candidates.append([docker_bin(), "compose"])
    except RuntimeError:
        pass
    if shutil.which("docker-compose"):
        candidates.append([shutil.which("docker-compose") or "docker-compose"])
    for candidate in candidates:
        try:
            result = subprocess.run([*candidate, "version"], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if result.returncode == 0:
            return candidate
    raise ComposeUnavailable("neither `docker compose` (v2 plugin) nor `docker-compose` (v1) runs here; "
                             "`apt-get install docker-compose` or install the compose plugin")


def is_v1(command: Sequence[str]) -> bool:
    return Path(command[0]).name == "docker-compose"


def compose_files(offline: bool) -> list[Path]:
    return [COMPOSE_FILE, OFFLINE_FILE] if offline else [COMPOSE_FILE]


def image_labels(image: str) -> dict[str, str]:
    out = docker(["image", "inspect", "--format", "{{json .Config.Labels}}", image]).stdout
    return json.loads(out) or {}


def compose_env(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every variable docker/compose.yaml (and compose.offline.yaml) reads, for this machine:
    the images the runtime would choose, and for the offline server the host paths it mounts."""
    values = {"STREAMLAB_UID": str(os.getuid()), "STREAMLAB_GID": str(os.getgid())}
    for service in SERVICES:
        values[f"STREAMLAB_IMAGE_{service.upper()}"] = image_for(service).image
    server = image_for("server")
    if server.offline:
        labels = image_labels(server.image)
        mounts = labels["streamlab.mounts"].split(":")
        values.update(STREAMLAB_PYTHON=labels["streamlab.python"], STREAMLAB_REPO=str(REPO_ROOT),
                      STREAMLAB_PYTHON_PREFIX=mounts[0])
    values.update(overrides or {})
    return values


def write_env_file(path: Path, values: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    what = (list(argv) if argv is not None else sys.argv[1:]) or ["command"]
    if what[0] == "command":
        print(" ".join(compose_command()))
    elif what[0] == "files":
        offline = image_for("server").offline
        print(" ".join(f"-f {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}"
                       for path in compose_files(offline)))
    elif what[0] == "env":
        sys.stdout.write("".join(f"{key}={value}\n" for key, value in compose_env().items()))
    else:
        print("usage: python -m proxies.runtime.compose command|files|env", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
