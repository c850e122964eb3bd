"""Run a proxy as a host process in its own temporary folder, on the ports its settings name.

    with run_proxy(NginxSettings(listen_port=free_port(), upstream_port=server.port)) as proxy:
        httpx.get(proxy.url + "/healthz")
        proxy.access_entries()[-1]["status"]

What differs between proxies (the command, its logs, its readiness, its reload) is its kind's
(proxies.kinds); this module reads it.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import httpx

from proxies.admin import admin_client, socket_in
from proxies.apps.settings import AppSettings
from proxies.base import ProxySettings
from proxies.binaries import binary
from proxies.kind import Endpoint, ProxyKind
from proxies.kinds import KINDS, release_of
from proxies.releases import Release
from proxies.rendering import render
from proxies import probes
from proxies.runtime import apps
from proxies.logs import PROCESS_LOG, READY_PATH, read_text
from proxies.tls import require_files
from proxies.validation import validate
from server.launcher import ServerHandle, running_server
from server.processes import ManagedProcess, managed, wait_until

if TYPE_CHECKING:  # the origin's modules import the MCP SDK (half a second): only where replicas run
    from server.mcp.knobs import OriginKnobs
    from server.mcp.replicas import Replicas


@dataclass
class LocalProxy:
    """A proxy running as a host process (implements runtime.base.RunningProxy)."""

    settings: ProxySettings
    config_text: str
    workdir: Path
    process: ManagedProcess

    @property
    def kind(self) -> ProxyKind:
        return KINDS[self.settings.proxy]

    @property
    def release(self) -> Release:
        return release_of(self.settings)

    @property
    def name(self) -> str:
        return f"{self.settings.proxy}:{self.settings.listen_port}"

    @property
    def url(self) -> str:
        scheme = "https" if getattr(self.settings, "tls_http2", False) else "http"
        return f"{scheme}://{self.settings.listen_host}:{self.settings.listen_port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def endpoint(self) -> Endpoint:
        """Its listener and its admin as this host reaches them (a socket in its working folder)."""
        socket = socket_in(self.workdir, getattr(self.settings, "admin_socket", None))
        return Endpoint(self.settings.listen_host, self.settings.listen_port,
                        None if socket else getattr(self.settings, "admin_port", None), socket)

    @property
    def admin_url(self) -> str:
        """The admin's TCP address; a proxy whose admin is on a Unix socket has none (use admin())."""
        endpoint = self.endpoint
        if self.kind.admin is None or endpoint.admin_port is None:
            where = f"on the Unix socket {endpoint.admin_socket}" if endpoint.admin_socket else "here"
            raise NotImplementedError(f"{self.settings.proxy} has no admin TCP port ({where})")
        return f"http://127.0.0.1:{endpoint.admin_port}"

    def admin(self, timeout_s: float = 5.0) -> httpx.Client:
        """A client for its admin, on its port or its socket: `with proxy.admin() as a: a.get("/stats")`."""
        if self.kind.admin is None:
            raise NotImplementedError(f"{self.settings.proxy} has no admin endpoint here")
        return admin_client(self.endpoint, timeout_s)

    def access_log(self) -> list[str]:
        # The readiness probes are this runtime's own requests, not the caller's.
        return [line for line in self.kind.logs.access(self.workdir, self.release) if READY_PATH not in line]

    def wait_access_log(self, count: int, timeout_s: float = 5.0) -> list[str]:
        """access_log() once it holds at least `count` lines (lines land when a request ends)."""
        wait_until(lambda: len(self.access_log()) >= count, timeout_s,
                   describe=f"{count} access line(s) from {self.name}")
        return self.access_log()

    def access_entries(self) -> list[dict[str, str]]:
        parse = self.kind.logs.parse
        return [entry for line in self.access_log() if (entry := parse(line))]

    def error_log(self) -> str:
        logs = self.kind.logs
        own = read_text(self.workdir / logs.error_file) if logs.error_file else ""
        access = set(self.access_log())
        rest = [line for line in read_text(self.workdir / PROCESS_LOG).splitlines()
                if line not in access and not line.startswith(logs.noise)]
        return own + "\n".join(rest)

    def stats(self, prefix: str = "") -> dict[str, int]:
        admin = self.kind.admin
        if admin is None:
            raise NotImplementedError(f"stats() reads an admin endpoint; {self.settings.proxy} has none here")
        with self.admin() as client:
            page = client.get(admin.stats_path)
        page.raise_for_status()
        counters = admin.parse_stats(page.text)
        return {name: value for name, value in counters.items() if name.startswith(prefix)}

    def ready(self) -> bool:
        return probes.ready(self.kind.ready, self.endpoint)

    def reload(self) -> None:
        """Reload the running proxy's config (its kind's reload signal): streams in flight stay on
        the old workers, new connections get new ones. Raises for a proxy without one."""
        sig = self.kind.reload_signal
        if sig is None:
            raise NotImplementedError(f"{self.settings.proxy} has no reload signal here")
        os.kill(self.pid, sig)


def listen_address(settings: ProxySettings) -> str:
    return f"{settings.listen_host}:{settings.listen_port}"


def command(settings: ProxySettings, workdir: Path, config_path: Path) -> list[str]:
    """The foreground command line for a config file inside `workdir`, run by the settings' release."""
    kind, release = KINDS[settings.proxy], release_of(settings)
    return [binary(settings.proxy, release.series),
            *kind.run(str(config_path), f"{workdir}/", listen_address(settings)), *kind.release_args(release)]


@contextlib.contextmanager
def run_proxy(settings: ProxySettings, workdir: Path | None = None,
              ready_timeout_s: float = 20.0) -> Iterator[LocalProxy]:
    """Render, validate, start, wait until ready (polling), yield; stop by PID even on errors."""
    require_files(settings)
    with contextlib.ExitStack() as stack:
        settings = stack.enter_context(KINDS[settings.proxy].helpers(settings))
        text = validate(render(settings), settings.proxy, settings.version)
        if workdir is None:
            workdir = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"streamlab-{settings.proxy}-")))
        workdir.mkdir(parents=True, exist_ok=True)
        # nginx's workers drop root to `nobody`: they must reach their temp folders in here.
        os.chmod(workdir, 0o755)
        config_path = workdir / settings.config_name
        config_path.write_text(text)
        process = ManagedProcess(name=f"{settings.proxy}:{settings.listen_port}",
                                 argv=command(settings, workdir, config_path),
                                 log_path=workdir / PROCESS_LOG, cwd=workdir,
                                 env={**os.environ, **KINDS[settings.proxy].env(f"{workdir}/")})
        running = LocalProxy(settings=settings, config_text=text, workdir=workdir, process=process)
        with managed(process, running.ready, ready_timeout_s):
            yield running


class LocalRuntime:
    """runtime.base.Runtime for host processes."""

    name = "local"

    def run_server(self, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                   nofile_soft: int | None = None) -> contextlib.AbstractContextManager[ServerHandle]:
        return running_server(args, env=env, nofile_soft=nofile_soft)

    def run_proxy(self, settings: ProxySettings,
                  workdir: Path | None = None) -> contextlib.AbstractContextManager[LocalProxy]:
        return run_proxy(settings, workdir)

    def run_app(self, settings: AppSettings,
                workdir: Path | None = None) -> contextlib.AbstractContextManager[apps.RunningApp]:
        return apps.run_app(settings, workdir)

    def run_mcp_replicas(self, count: int, knobs: "OriginKnobs", *,
                         sdk: str) -> contextlib.AbstractContextManager["Replicas"]:
        from server.mcp.replicas import running_replicas
        return running_replicas(count, knobs, sdk=sdk)
