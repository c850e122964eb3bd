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
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Sequence

from proxies.base import ProxyName, ProxySettings
from proxies.rendering import render
from proxies.tls import require_files
from proxies.runtime.dockercli import DockerError, docker, docker_bin, host_user, require_engine
from proxies.runtime.images import (Choice, ImageMissing, image_for, offline_server_built_here,
                                    offline_server_labels)
from proxies.runtime.invocation import foreground_args, proxy_env
from proxies.runtime.local import PROCESS_LOG, LocalProxy
from proxies.validation import CONFIG_NAMES, ConfigInvalid, validate
from proxies.variants import SETTINGS_TYPES
from server.processes import ManagedProcess, ProcessFailed, free_port

if TYPE_CHECKING:
    from proxies.apps.settings import AppSettings
    from proxies.runtime.apps import RunningApp
    from server.launcher import ServerHandle

CONFIG_DIR = "/etc/streamlab"  # the config, read-only
PREFIX = "/var/lib/streamlab"  # nginx's -p prefix: pid, logs and temp folders (the work folder)
LABEL = "streamlab"  # every container carries it: `docker ps --filter label=streamlab`
STOP_TIMEOUT_S = 5  # SIGTERM through --init, SIGKILL after this
# The binary each proxy's image runs, where it is not named like the proxy.
ENTRYPOINTS = {"varnish": "varnishd", "apache": "apache2"}


def proxy_args(proxy: ProxyName | ProxySettings) -> list[str]:
    """Arguments after `--entrypoint BINARY`: the local runtime's foreground command, pointed at
    the mounted config and prefix (docker/compose.yaml runs the same lines; a test keeps them so).
    A proxy name stands for its defaults' addresses (127.0.0.1:8080, as the fixed configs listen).

    The prefix is the bind-mounted work folder (nginx, Varnish, Apache, Caddy), so pid, logs and
    work files land where the host reads them; HAProxy and Envoy log to stdout, which
    `docker run` streams to process.log.
    """
    settings = SETTINGS_TYPES[proxy]() if isinstance(proxy, str) else proxy
    return foreground_args(settings, f"{CONFIG_DIR}/{CONFIG_NAMES[settings.proxy]}", f"{PREFIX}/")


def check_args(proxy: ProxyName) -> list[str]:
    config = f"{CONFIG_DIR}/{CONFIG_NAMES[proxy]}"
    if proxy == "nginx":
        return ["-t", "-q", "-p", f"{PREFIX}/", "-c", config, "-e", "stderr"]
    if proxy == "haproxy":
        return ["-c", "-f", config]
    if proxy == "varnish":
        return ["-C", "-j", "none", "-f", config]
    if proxy == "apache":
        return ["-t", "-d", PREFIX, "-f", config]
    if proxy == "caddy":
        return ["validate", "--config", config, "--adapter", "caddyfile"]
    return ["--mode", "validate", "-c", config, "-l", "error"]


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


def bind(source: Path | str, target: str, readonly: bool = True) -> list[str]:
    spec = f"type=bind,source={source},target={target}"
    return ["--mount", spec + (",readonly" if readonly else "")]


# ---- validation ------------------------------------------------------------------------------

_checked: set[tuple[str, str]] = set()  # (image, sha256 of config) proven valid in this process


def check(text: str, proxy: ProxyName, choice: Choice, files: Iterable[str] = ()) -> str:
    """Prove the config valid with the binary that will run it, before anything runs it.

    An offline image holds the host's own binary, so the (cached) host check is the same check
    and costs no container; any other image checks in a throwaway container (~0.3 s, cached),
    with `files` (a TLS config's certificate and key, which the binary loads) at their paths.
    """
    if choice.offline:
        return validate(text, proxy)
    key = (choice.image, hashlib.sha256(text.encode()).hexdigest())
    if key in _checked:
        return text
    with tempfile.TemporaryDirectory(prefix=f"streamlab-check-{proxy}-") as tmp:
        config = Path(tmp) / CONFIG_NAMES[proxy]
        config.write_text(text)
        config.chmod(0o644)
        result = docker(["run", "--rm", "--network", "none", "--user", host_user(),
                         "--label", LABEL, "--tmpfs", f"{PREFIX}:mode=1777",
                         *bind(config, f"{CONFIG_DIR}/{CONFIG_NAMES[proxy]}"),
                         *[arg for path in dict.fromkeys(files) for arg in bind(Path(path), path)],
                         *(["--env", f"HOME={PREFIX}"] if proxy == "caddy" else []),
                         "--entrypoint", ENTRYPOINTS.get(proxy, proxy), choice.image, *check_args(proxy)],
                        check=False, timeout=120)
    if result.returncode != 0:
        raise ConfigInvalid(proxy, (result.stderr + result.stdout) or f"exit status {result.returncode}", text)
    _checked.add(key)
    return text


# ---- containers ------------------------------------------------------------------------------

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
        """Stop by id (SIGTERM via --init, so milliseconds), reap the client, make sure it is gone."""
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
    process.start()
    try:
        try:
            process.wait_ready(ready, timeout_s)
        except ProcessFailed as exc:
            raise ProcessFailed(f"container {name}: {exc}") from None
        handle.read_id()
        yield handle
    finally:
        handle.stop()


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
    proxy = settings.proxy
    args = [*base_run_args(name, proxy), *bind(config_path, f"{CONFIG_DIR}/{CONFIG_NAMES[proxy]}")]
    if proxy in ("nginx", "varnish", "apache", "caddy"):
        # Relative paths (Caddy's access.log) resolve in the prefix, as in the local runtime.
        args += [*bind(workdir, PREFIX, readonly=False), "--workdir", PREFIX]
    # A TLS listener's certificate and key (the run-time ones or the user's), at the same paths inside.
    for path in dict.fromkeys(settings.tls_files().values()):
        args += bind(Path(path), path)
    for key, value in (proxy_env(proxy, f"{PREFIX}/", {}) or {}).items():
        args += ["--env", f"{key}={value}"]
    return [*args, "--entrypoint", ENTRYPOINTS.get(proxy, proxy), image, *proxy_args(settings)]


@contextlib.contextmanager
def run_proxy(settings: ProxySettings, workdir: Path | None = None,
              ready_timeout_s: float = 30.0) -> Iterator[DockerProxy]:
    """Render, validate, start the container, wait until ready (polling), yield; stop on exit."""
    require_files(settings)
    require_engine()
    choice = image_for(settings.proxy)
    text = check(render(settings), settings.proxy, choice, settings.tls_files().values())
    with contextlib.ExitStack() as stack:
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
        from proxies.runtime.docker_apps import run_app  # it imports this module

        return run_app(settings, workdir)


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
    for key, value in env.items():
        run += ["--env", f"{key}={value}"]
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
    from server.launcher import ServerHandle, _healthy

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
