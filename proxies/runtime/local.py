"""Run a proxy as a host process in its own temporary folder, on the ports its settings name.

    with run_proxy(NginxSettings(listen_port=free_port(), upstream_port=server.port)) as proxy:
        httpx.get(proxy.url + "/healthz")
        proxy.access_entries()[-1]["status"]
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import socket
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from proxies.base import ProxyName, ProxySettings
from proxies.binaries import binary
from proxies.rendering import render
from proxies.runtime import logs
from proxies.runtime.invocation import RELOAD_SIGNALS, foreground_args, proxy_env
from proxies.tls import require_files
from proxies.validation import validate
from server.processes import ManagedProcess, managed, port_accepts, wait_until

if TYPE_CHECKING:
    from proxies.apps.settings import AppSettings
    from proxies.runtime.apps import RunningApp
    from server.launcher import ServerHandle

PROCESS_LOG = "process.log"  # the binary's stdout and stderr


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


@dataclass
class LocalProxy:
    """A proxy running as a host process (implements runtime.base.RunningProxy)."""

    settings: ProxySettings
    config_text: str
    workdir: Path
    process: ManagedProcess

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
    def admin_url(self) -> str:
        port = getattr(self.settings, "admin_port", None)
        if port is None:
            raise NotImplementedError(f"{self.settings.proxy} has no admin endpoint here")
        return f"http://127.0.0.1:{port}"

    def _process_lines(self) -> list[str]:
        return _read(self.workdir / PROCESS_LOG).splitlines()

    def access_log(self) -> list[str]:
        proxy = self.settings.proxy
        if proxy == "nginx":
            return _read(self.workdir / "access.log").splitlines()
        if proxy == "haproxy":
            return [line for line in self._process_lines() if logs.parse_httplog(line)]
        if proxy == "varnish":
            lines = logs.varnish_access_lines(self.workdir / "varnish")
        elif proxy in ("apache", "caddy"):
            lines = _read(self.workdir / "access.log").splitlines()
        else:
            return [line for line in self._process_lines() if logs.is_logfmt_access_line(line)]
        # The readiness probes are this runtime's own requests, not the caller's.
        return [line for line in lines if logs.READY_PATH not in line]

    def wait_access_log(self, count: int, timeout_s: float = 5.0) -> list[str]:
        """access_log() once it holds at least `count` lines (lines land when a request ends)."""
        wait_until(lambda: len(self.access_log()) >= count, timeout_s,
                   describe=f"{count} access line(s) from {self.name}")
        return self.access_log()

    def access_entries(self) -> list[dict[str, str]]:
        if self.settings.proxy == "haproxy":
            return [entry for line in self.access_log() if (entry := logs.parse_httplog(line))]
        if self.settings.proxy == "caddy":
            return [logs.parse_caddy_json(line) for line in self.access_log()]
        return [logs.parse_logfmt(line) for line in self.access_log()]

    def error_log(self) -> str:
        own = _read(self.workdir / "error.log") if self.settings.proxy in ("nginx", "apache") else ""
        access = set(self.access_log())
        # Varnish's start-up "Debug:" lines (its platform string has "-hcritbit" in it) are noise.
        rest = [line for line in self._process_lines() if line not in access and not line.startswith("Debug:")]
        return own + "\n".join(rest)

    def stats(self, prefix: str = "") -> dict[str, int]:
        if self.settings.proxy != "envoy":
            raise NotImplementedError(f"stats() reads Envoy's admin endpoint; {self.settings.proxy} has none here")
        with urllib.request.urlopen(f"{self.admin_url}/stats", timeout=5) as response:
            text = response.read().decode()
        counters: dict[str, int] = {}
        for line in text.splitlines():
            name, _, value = line.partition(": ")
            if name.startswith(prefix) and value.strip().lstrip("-").isdigit():
                counters[name] = int(value)
        return counters

    def ready(self) -> bool:
        if self.settings.proxy == "envoy" and not _http_ok(f"{self.admin_url}/ready"):
            return False
        if not port_accepts(self.settings.listen_port, self.settings.listen_host):
            return False
        if self.settings.proxy in ("varnish", "apache", "caddy"):
            # Apache opens its port before a bad config makes it exit, Varnish before its child
            # has loaded the VCL: only an answer (whatever its status) proves it serves.
            return _answers_itself(self.settings.listen_host, self.settings.listen_port)
        return True

    def reload(self) -> None:
        """Reload the running proxy's config (RELOAD_SIGNALS): streams in flight stay on the
        old workers, new connections get new ones. Raises for a proxy without a reload signal."""
        sig = RELOAD_SIGNALS.get(self.settings.proxy)
        if sig is None:
            raise NotImplementedError(f"{self.settings.proxy} has no reload signal here")
        os.kill(self.pid, sig)


def _answers_itself(host: str, port: int) -> bool:
    """Whether the proxy answers HTTP. The probe is an HTTP/1.1 request without a Host header,
    which every proxy refuses with a 400 of its own: it never reaches the upstream (a request
    counted there, or cached by Varnish, would skew what a test measures)."""
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.sendall(f"GET {logs.READY_PATH} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
            return sock.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def command(settings: ProxySettings, workdir: Path, config_path: Path) -> list[str]:
    """The foreground command line for a config file inside `workdir`."""
    return [binary(settings.proxy), *foreground_args(settings, str(config_path), f"{workdir}/")]


@contextlib.contextmanager
def run_proxy(settings: ProxySettings, workdir: Path | None = None,
              ready_timeout_s: float = 20.0) -> Iterator[LocalProxy]:
    """Render, validate, start, wait until ready (polling), yield; stop by PID even on errors."""
    require_files(settings)
    text = validate(render(settings), settings.proxy)
    with contextlib.ExitStack() as stack:
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
                                 env=proxy_env(settings.proxy, f"{workdir}/", os.environ))
        running = LocalProxy(settings=settings, config_text=text, workdir=workdir, process=process)
        with managed(process, running.ready, ready_timeout_s):
            yield running


class LocalRuntime:
    """runtime.base.Runtime for host processes."""

    name = "local"

    def run_server(self, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                   nofile_soft: int | None = None) -> contextlib.AbstractContextManager[ServerHandle]:
        from server.launcher import running_server  # server.launcher imports this package

        return running_server(args, env=env, nofile_soft=nofile_soft)

    def run_proxy(self, settings: ProxySettings,
                  workdir: Path | None = None) -> contextlib.AbstractContextManager[LocalProxy]:
        return run_proxy(settings, workdir)

    def run_app(self, settings: AppSettings,
                workdir: Path | None = None) -> contextlib.AbstractContextManager[RunningApp]:
        from proxies.runtime.apps import run_app  # the apps import this module

        return run_app(settings, workdir)
