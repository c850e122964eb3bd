"""Run an app hop (any row of proxies.apps.kinds.APP_KINDS) as a host process or in a container,
like the proxies: its own work folder, readiness polled on a real request through the
app (`GET /v1/models`), stopped by PID (or container id) even when the body raises.

    with run_app(app_settings("express").with_(listen_port=free_port(), upstream_port=server.port)) as app:
        httpx.post(app.url + "/v1/chat/completions", ...)
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from proxies.apps.kinds import app_kind
from proxies.apps.launch import READY_PATH, Launch
from proxies.apps.settings import AppSettings
from proxies.logs import PROCESS_LOG
from server.processes import ManagedProcess, managed

READY_TIMEOUT_S = 60.0  # LiteLLM takes ~5-7 s here, Next.js ~0.2 s, the others less


@dataclass
class RunningApp:
    """A started, ready app hop (what runtime.base.RunningProxy offers, as far as an app has it)."""

    settings: AppSettings
    config_text: str
    workdir: Path
    launched: Launch
    process: ManagedProcess | None = None
    container_pid: int = 0
    warm: bool = False
    # The folder it writes outside its work folder, if its kind makes one (AppKind.side_folder).
    side_folder: Path | None = None

    @property
    def name(self) -> str:
        return f"{self.settings.app}:{self.settings.listen_port}"

    @property
    def url(self) -> str:
        """Where clients reach the upstream's paths through the app (its root, or a prefix)."""
        return f"http://{self.settings.listen_host}:{self.settings.listen_port}{self.launched.url_path}"

    @property
    def forward_origin(self) -> str | None:
        """A forward proxy's origin (clients ask it for this URL's paths); None for the others."""
        return self.launched.forward_origin

    @property
    def pid(self) -> int:
        if self.container_pid:
            return self.container_pid
        assert self.process is not None, "not started"
        return self.process.pid

    def access_log(self) -> list[str]:
        return []  # apps write no access log the labs parse; error_log() has all they said

    def error_log(self) -> str:
        """Everything the app wrote to stdout and stderr (gunicorn's WORKER TIMEOUT, LiteLLM's errors)."""
        try:
            return (self.workdir / PROCESS_LOG).read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def ready(self) -> bool:
        """A real request through the app answers 200 (a listening port alone proves nothing:
        Next.js and LiteLLM open theirs before they can serve)."""
        origin = self.forward_origin
        request = urllib.request.Request((origin or self.url) + READY_PATH, headers=self.launched.ready_headers)
        # A forward proxy is ready when it fetches the origin's page for a client that names it
        # as its proxy; every other app when it serves the page itself.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler(
            {"http": self.url} if origin else {}))
        try:
            with opener.open(request, timeout=2) as response:
                response.read()
                if response.status != 200:
                    return False
        except OSError:
            return False
        return self._warmed()

    def _warmed(self) -> bool:
        """The app's warm-up completion has been answered, whatever its status."""
        if self.launched.warm_up is None or self.warm:
            return True
        body = json.dumps(self.launched.warm_up).encode()
        for path in self.launched.warm_up_paths:
            request = urllib.request.Request(self.url + path, data=body, headers={
                **self.launched.ready_headers, "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
            except urllib.error.HTTPError as answered:  # a 4xx/5xx is an answer: the path is warm
                answered.read()
            except OSError:
                return False
        self.warm = True
        return True


@contextlib.contextmanager
def prepared(settings: AppSettings, workdir: Path | None, kind: str) -> Iterator[RunningApp]:
    """The app's work folder (its files written) and its kind's side folder, removed on exit."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"streamlab-{settings.app}-{kind}-")))
        workdir.mkdir(parents=True, exist_ok=True)
        os.chmod(workdir, 0o755)  # a container's user reads its files
        hop = app_kind(settings.app)
        launched = hop.launch(settings, workdir, sys.executable)
        for name, text in launched.files.items():
            (workdir / name).write_text(text)
            (workdir / name).chmod(0o644)
        side_folder = None
        if hop.side_folder is not None:
            side_folder = hop.side_folder(settings, workdir)
            stack.callback(shutil.rmtree, side_folder, True)
        yield RunningApp(settings=settings, config_text=launched.shown(), workdir=workdir,
                         launched=launched, side_folder=side_folder)


@contextlib.contextmanager
def run_app(settings: AppSettings, workdir: Path | None = None,
            ready_timeout_s: float = READY_TIMEOUT_S) -> Iterator[RunningApp]:
    """Start the app as a host process in its own process group, wait until ready, yield, stop."""
    with prepared(settings, workdir, "local") as app:
        app.process = ManagedProcess(name=app.name, argv=app.launched.argv, log_path=app.workdir / PROCESS_LOG,
                                     cwd=app.launched.cwd, env={**os.environ, **app.launched.env})
        with managed(app.process, app.ready, ready_timeout_s):
            yield app
