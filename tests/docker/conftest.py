"""pytest-docker, set up for this project.

pytest-docker 3.x calls `docker compose` and starts with `up --build --wait`; Debian has only
Compose v1 (`docker-compose`, no `--wait`) and this machine cannot build images that need a
registry. So: the compose command is detected (v2 plugin, else v1), `up -d --no-build` starts the
stack, readiness is polled with `docker_services.wait_until_responsive` (v1 and v2 alike), the
project name is unique per run, and the stack is taken down even when `up` itself fails.

Every test here that needs a Docker engine skips without one, saying why, except under CI
(`CI=true`), where a missing engine is a failure (tests/runtimes.py decides, for the runtime
suite's `docker` case too).
"""
from __future__ import annotations

import os
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest
from pytest_docker.plugin import DockerComposeExecutor, Services, get_docker_services

from proxies import variant
from proxies.base import ProxyName
from proxies.kinds import KINDS
from proxies.rendering import render
from proxies.runtime.compose import (ComposeUnavailable, compose_command, compose_env, compose_files,
                                     is_v1, write_env_file)
from proxies.runtime.images import image_for
from proxies.runtime.local import LocalProxy
from server.launcher import _healthy
from server.processes import free_port
from tests.runtimes import COMPOSE_PROXIES as PROXIES
from tests.runtimes import on_free_ports, require_engine, require_images, unavailable

PROFILES = " ".join(f"--profile {name}" for name in PROXIES)
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`-m docker` / `-m "not docker"` select the tests here that need an engine."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents and "docker_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    require_engine()


@pytest.fixture(scope="session")
def images(docker_engine: None) -> dict[str, str]:
    """The proxies' images (offline stand-ins here, official ones where present or pullable)."""
    return require_images(PROXIES)


@pytest.fixture(scope="session")
def server_image(docker_engine: None) -> str:
    """The model server's image: built from docker/server.Dockerfile, or the offline stand-in."""
    return require_images(("server",))["server"]


@dataclass
class Stack:
    """Where the compose stack's services listen (free ports) and the configs they run.

    Each proxy is the runtime's own LocalProxy, pointed at the files compose mounts: its `url`,
    `admin_url`, `ready()` and `stats()` are the ones every runtime test uses, not copies. Compose
    owns the processes, so there is none to hand it.
    """

    folder: Path
    server_port: int = field(default_factory=free_port)
    proxies: dict[ProxyName, LocalProxy] = field(default_factory=dict)

    @property
    def server_url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def nginx_prefix(self) -> Path:
        return self.prefix("nginx")

    def prefix(self, proxy: ProxyName) -> Path:
        """The work folder compose mounts for a proxy that writes files (logs, pid, Varnish's
        shared-memory log, Envoy's admin socket); HAProxy and Envoy log to compose."""
        return self.folder / proxy


# The proxies that write into a mounted prefix (as in the Docker runtime).
WITH_PREFIX: tuple[ProxyName, ...] = tuple(name for name in PROXIES if KINDS[name].writes_prefix)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, images: dict[str, str], server_image: str) -> Stack:
    """proxies/fixed/ configs (the fixed variants, rendered) moved onto free ports."""
    folder = tmp_path_factory.mktemp("compose")
    result = Stack(folder)
    for proxy in PROXIES:
        settings = on_free_ports(variant(proxy, "fixed"), result.server_port)
        text = render(settings)
        path = folder / settings.config_name
        path.write_text(text)
        path.chmod(0o644)
        # Logs land in the mounted prefix; HAProxy and Envoy log to compose, not to files.
        workdir = result.prefix(proxy) if proxy in WITH_PREFIX else folder
        if proxy in WITH_PREFIX:
            workdir.mkdir(mode=0o755)
        result.proxies[proxy] = LocalProxy(settings=settings, config_text=text, workdir=workdir,
                                           process=None)  # type: ignore[arg-type]
    folder.chmod(0o755)
    return result


@pytest.fixture(scope="session")
def docker_compose_command(docker_engine: None, stack: Stack) -> str:
    """v2 or v1, with this session's env file and every proxy's profile (global options)."""
    try:
        command = compose_command()
    except ComposeUnavailable as exc:
        unavailable(str(exc))
        raise
    env = compose_env({
        "SERVER_PORT": str(stack.server_port),
        "VARNISH_PORT": str(stack.proxies["varnish"].settings.listen_port),
        **{f"{proxy.upper()}_CONFIG": str(stack.folder / running.settings.config_name)
           for proxy, running in stack.proxies.items()},
        **{f"{proxy.upper()}_PREFIX": str(stack.prefix(proxy)) for proxy in WITH_PREFIX},
    })
    env_file = write_env_file(stack.folder / "compose.env", env)
    return f"{shlex.join(command)} --env-file {shlex.quote(str(env_file))} {PROFILES}"


@pytest.fixture(scope="session")
def docker_compose_file(server_image: str) -> list[str]:
    return [str(path) for path in compose_files(offline=image_for("server").offline)]


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    """Unique per run, so parallel sessions (and other engineers) never share containers."""
    return f"streamlab-test-{os.getpid()}-{secrets.token_hex(3)}"


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    # --no-build: never reach for a registry; v1 has no --wait, so readiness is polled below.
    wait = "" if is_v1(compose_command()) else " --wait"
    return [f"up -d --no-build{wait}"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down --volumes --remove-orphans --timeout 5"]


@pytest.fixture(scope="session")
def docker_services(docker_compose_command: str, docker_compose_file: list[str],
                    docker_compose_project_name: str, docker_setup: list[str],
                    docker_cleanup: list[str]) -> Iterator[Services]:
    """pytest-docker's fixture, plus: if `up` fails, dump the logs and take the stack down (the
    plugin runs its clean-up only after a successful setup)."""
    executor = DockerComposeExecutor(docker_compose_command, docker_compose_file,
                                     docker_compose_project_name)
    started = False
    try:
        with get_docker_services(docker_compose_command, docker_compose_file,
                                 docker_compose_project_name, docker_setup, docker_cleanup) as services:
            started = True
            yield services
    except Exception as exc:
        if started:
            raise
        logs = executor.execute("logs --no-color --tail 40", success_codes=range(256)).decode(errors="replace")
        for command in docker_cleanup:
            executor.execute(command, success_codes=range(256))
        raise RuntimeError(f"compose up failed: {exc}\n--- logs ---\n{logs}") from None


@pytest.fixture(scope="session")
def compose_stack(docker_services: Services, stack: Stack, docker_compose_command: str,
                  docker_compose_file: list[str], docker_compose_project_name: str) -> Stack:
    """The stack, ready: the server's /healthz, then each proxy as the runtime judges it (its
    port; Envoy's admin /ready too)."""
    checks: dict[str, Callable[[], bool]] = {"server": lambda: _healthy(stack.server_url)}
    for proxy in PROXIES:
        checks[proxy] = stack.proxies[proxy].ready
    for name, check in checks.items():
        try:
            docker_services.wait_until_responsive(check=check, timeout=120.0, pause=0.05)
        except Exception:
            executor = DockerComposeExecutor(docker_compose_command, docker_compose_file,
                                             docker_compose_project_name)
            logs = executor.execute("logs --no-color --tail 40", success_codes=range(256))
            pytest.fail(f"{name} did not become ready in its container:\n{logs.decode(errors='replace')}")
    return stack
