"""Run a proxy (or the model server) in a Docker container: the same seam as the local runtime.

    with DockerRuntime().run_proxy(NginxSettings(listen_port=free_port(), upstream_port=8000)) as proxy:
        httpx.get(proxy.url + "/healthz")
        proxy.access_entries()[-1]["status"]

One container per proxy, `--network host` (the proxy binds the 127.0.0.1 port its config names,
exactly as a host process would), the rendered config bind-mounted read-only, `--init` so
SIGTERM reaches the proxy and a stop takes milliseconds, `--rm` plus an explicit stop by
container id on the way out (even when the body raises), and a unique name per container so
parallel runs never collide.

The `docker run` client stays attached: it streams the container's stdout and stderr into the
work folder's `process.log`, and nginx writes access.log/error.log into the work folder (its
`-p` prefix is bind-mounted), so logs are read exactly as the local runtime reads them, and they
survive the container.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

from proxies.apps.settings import AppSettings
from proxies.base import ProxyName, ProxySettings
from proxies.kinds import KINDS, release_of
from proxies.rendering import render
from proxies.runtime import docker_apps
from proxies.runtime.apps import RunningApp
from proxies.runtime.containers import (CONFIG_DIR, LABEL, PREFIX, Container, base_run_args, bind,
                                        container, container_name, env_options)
from proxies.runtime.dockercli import docker, host_user, require_engine
from proxies.runtime.images import (Choice, ImageMissing, image_for, offline_server_built_here,
                                    offline_server_labels)
from proxies.runtime.local import LocalProxy, listen_address
from proxies.tls import require_files
from proxies.validation import ConfigInvalid, validate
from server.launcher import ServerHandle, _healthy
from server.processes import free_port

if TYPE_CHECKING:  # the origin's modules import the MCP SDK: only where replicas run
    from server.mcp.knobs import OriginKnobs
    from server.mcp.replicas import Replicas


def proxy_args(proxy: ProxyName | ProxySettings) -> list[str]:
    """Arguments after `--entrypoint BINARY`: the local runtime's foreground command, pointed at
    the mounted config and prefix (docker/compose.yaml runs the same lines; a test keeps them so).
    A proxy name stands for its defaults' addresses (127.0.0.1:8080, as the fixed configs listen).

    The prefix is the bind-mounted work folder of a kind that writes there (`writes_prefix`), so
    pid, logs and work files land where the host reads them; the others log to stdout, which
    `docker run` streams to process.log.
    """
    settings = KINDS[proxy].settings() if isinstance(proxy, str) else proxy
    kind = KINDS[settings.proxy]
    return kind.run(f"{CONFIG_DIR}/{kind.config_name}", f"{PREFIX}/", listen_address(settings))


def env_args(proxy: ProxyName) -> list[str]:
    """`--env` options for the variables the kind sets, pointed at the prefix."""
    return env_options(KINDS[proxy].env(f"{PREFIX}/"))


# ---- validation ------------------------------------------------------------------------------

_checked: set[tuple[str, str]] = set()  # (image, sha256 of config) proven valid in this process


def check(text: str, proxy: ProxyName, choice: Choice, files: Iterable[str] = ()) -> str:
    """Prove the config valid with the binary that will run it, before anything runs it.

    A stand-in holds the binary this machine has for the same release (the host's own, or the
    unpacked release's), so the (cached) host check of that release is the same check and costs
    no container; any other image checks in a throwaway container (~0.3 s, cached), with `files`
    (a TLS config's certificate and key, which the binary loads) at their paths.
    """
    if choice.offline:
        return validate(text, proxy, choice.release.series if choice.release else None)
    key = (choice.image, hashlib.sha256(text.encode()).hexdigest())
    if key in _checked:
        return text
    kind = KINDS[proxy]
    config = f"{CONFIG_DIR}/{kind.config_name}"
    with tempfile.TemporaryDirectory(prefix=f"streamlab-check-{proxy}-") as tmp:
        written = Path(tmp) / kind.config_name
        written.write_text(text)
        written.chmod(0o644)
        result = docker(["run", "--rm", "--network", "none", "--user", host_user(),
                         "--label", LABEL, "--tmpfs", f"{PREFIX}:mode=1777", *bind(written, config),
                         *[arg for path in dict.fromkeys(files) for arg in bind(Path(path), path)],
                         *env_args(proxy), "--entrypoint", kind.image.entrypoint, choice.image,
                         *kind.check(config, f"{PREFIX}/")],
                        check=False, timeout=120)
    refusal = kind.check_refusal(result.returncode, result.stderr + result.stdout)
    if refusal is not None:
        raise ConfigInvalid(proxy, refusal, text)
    _checked.add(key)
    return text


# ---- proxies ---------------------------------------------------------------------------------

@dataclass
class DockerProxy(LocalProxy):
    """A proxy running in a container (implements runtime.base.RunningProxy).

    Log parsing and readiness are LocalProxy's: the files it reads are the same files.
    """

    image: str = ""
    container: Container | None = None
    container_pid: int = 0

    @property
    def pid(self) -> int:
        """The container's init process as the host sees it (0 once it is gone)."""
        return self.container_pid

    @property
    def container_id(self) -> str:
        return self.container.id if self.container else ""


def proxy_run_args(settings: ProxySettings, workdir: Path, config_path: Path, name: str,
                   image: str) -> list[str]:
    kind = KINDS[settings.proxy]
    args = [*base_run_args(name, kind.name), *bind(config_path, f"{CONFIG_DIR}/{kind.config_name}")]
    if kind.writes_prefix:
        # Relative paths (Caddy's access.log) resolve in the prefix, as in the local runtime.
        args += [*bind(workdir, PREFIX, readonly=False), "--workdir", PREFIX]
    # A TLS listener's certificate and key (the run-time ones or the user's), at the same paths inside.
    for path in dict.fromkeys(settings.tls_files().values()):
        args += bind(Path(path), path)
    return [*args, *env_args(kind.name), "--entrypoint", kind.image.entrypoint, image, *proxy_args(settings)]


@contextlib.contextmanager
def run_proxy(settings: ProxySettings, workdir: Path | None = None,
              ready_timeout_s: float = 30.0) -> Iterator[DockerProxy]:
    """Render, validate, start the container of the settings' release (its image), wait until
    ready (polling), yield; stop on exit."""
    require_files(settings)
    require_engine()
    choice = image_for(settings.proxy, release_of(settings).series)
    with contextlib.ExitStack() as stack:
        # Its helpers run on the host, reached over the host network as the proxy's own ports are.
        settings = stack.enter_context(KINDS[settings.proxy].helpers(settings))
        text = check(render(settings), settings.proxy, choice, settings.tls_files().values())
        if workdir is None:
            workdir = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"streamlab-{settings.proxy}-docker-")))
        workdir.mkdir(parents=True, exist_ok=True)
        # nginx's workers (nobody, when root) must reach their temp folders in the mounted prefix.
        os.chmod(workdir, 0o755)
        config_path = workdir / settings.config_name
        config_path.write_text(text)
        config_path.chmod(0o644)
        name = container_name(settings.proxy, settings.listen_port)
        # `process` is the attached client, known once started; readiness needs only the settings.
        running = DockerProxy(settings=settings, config_text=text, workdir=workdir,
                              process=None, image=choice.image)  # type: ignore[arg-type]
        args = proxy_run_args(settings, workdir, config_path, name, choice.image)
        with container(name, args, workdir, running.ready, ready_timeout_s) as started:
            running.process, running.container = started.process, started
            running.container_pid = started.host_pid()
            try:
                yield running
            finally:
                running.container_pid = 0


class DockerRuntime:
    """runtime.base.Runtime for containers (LAB_RUNTIME=docker)."""

    name = "docker"

    def run_server(self, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                   nofile_soft: int | None = None) -> contextlib.AbstractContextManager[ServerHandle]:
        return running_server(args, env=env, nofile_soft=nofile_soft)

    def run_proxy(self, settings: ProxySettings,
                  workdir: Path | None = None) -> contextlib.AbstractContextManager[DockerProxy]:
        return run_proxy(settings, workdir)

    def run_app(self, settings: AppSettings,
                workdir: Path | None = None) -> contextlib.AbstractContextManager[RunningApp]:
        return docker_apps.run_app(settings, workdir)

    def run_mcp_replicas(self, count: int, knobs: "OriginKnobs", *,
                         sdk: str) -> contextlib.AbstractContextManager["Replicas"]:
        from proxies.runtime import docker_mcp
        return docker_mcp.running_replicas(count, knobs, sdk=sdk)


# ---- the model server ------------------------------------------------------------------------

def server_run_args(choice: Choice, name: str, args: Sequence[str], host: str, port: int,
                    env: Mapping[str, str], nofile_soft: int | None = None) -> list[str]:
    """`docker run` arguments for `python -m server --host HOST --port PORT ARGS`.

    Offline image: the host's interpreter prefix and the repository (code, .venv, .models) are
    bind-mounted read-only at their host paths (the image's labels name them), so the container
    runs the working tree's code with the host's packages. Online image: the code and a built
    model are inside it (docker/server.Dockerfile).
    """
    run = [*base_run_args(name, "server"), "--tmpfs", "/tmp:mode=1777",
           "--env", "HOME=/tmp", "--env", "HF_HUB_OFFLINE=1", "--env", "PYTHONDONTWRITEBYTECODE=1",
           "--env", "PYTHONUNBUFFERED=1"]
    run += env_options(env)
    if nofile_soft is not None:
        # As `ulimit -Sn N` before a host process: the soft limit lowered, the hard one kept.
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        run += ["--ulimit", f"nofile={nofile_soft}:{hard}"]
    server = ["-m", "server", "--host", host, "--port", str(port), *args]
    if not choice.offline:
        return [*run, "--entrypoint", "python", choice.image, *server]
    meta = offline_server_labels(choice.image)
    mounts = [folder for folder in meta.get("streamlab.mounts", "").split(":") if folder]
    repo = Path(__file__).resolve().parents[2]
    if not offline_server_built_here(choice.image):  # it would run another checkout's code
        raise ImageMissing(f"{choice.image} was built for {':'.join(mounts) or 'another machine'}, "
                           f"not {repo}: run `make images-offline` here")
    for folder in mounts:
        run += bind(folder, folder)
    return [*run, "--workdir", str(repo), "--entrypoint", meta["streamlab.python"], choice.image, *server]


@contextlib.contextmanager
def running_server(args: Sequence[str] = (), *, host: str = "127.0.0.1", port: int | None = None,
                   env: Mapping[str, str] | None = None, workdir: Path | None = None,
                   ready_timeout_s: float = 120.0, nofile_soft: int | None = None) -> Iterator["ServerHandle"]:
    """server.launcher.running_server, in a container: yields the same ServerHandle."""
    require_engine()
    choice = image_for("server")
    port = port or free_port(host)
    with contextlib.ExitStack() as stack:
        folder = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="streamlab-server-docker-")))
        name = container_name("server", port)
        url = f"http://{host}:{port}"
        run = server_run_args(choice, name, args, host, port, env or {}, nofile_soft)
        with container(name, run, folder, lambda: _healthy(url), ready_timeout_s) as started:
            yield ServerHandle(host=host, port=port, process=started.process)
