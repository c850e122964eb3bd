"""Run an app hop in a container: the same Launch the host process runs, in the apps image.

The apps image (`make images-offline`: the server's stand-in plus the host's `node`) mounts the
interpreter prefix and the repository read-only at their host paths, like the server's, so the
container runs the working tree's programs with the installed node_modules, .venv and LiteLLM's
venv; the app's work folder (and its kind's side folder: a Next.js run's dist) are mounted writable.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from proxies.apps.settings import AppSettings
from proxies.runtime.apps import READY_TIMEOUT_S, RunningApp, prepared
from proxies.runtime.containers import base_run_args, bind, container, container_name, env_options
from proxies.runtime.dockercli import require_engine
from proxies.runtime.images import ImageMissing, image_for, offline_server_built_here, offline_server_labels


def app_run_args(app: RunningApp, image: str, name: str) -> list[str]:
    if not offline_server_built_here(image):  # it would run another checkout's programs
        raise ImageMissing(f"{image} was built for another checkout: run `make images-offline` here")
    launched = app.launched
    run = [*base_run_args(name, app.settings.app), "--tmpfs", "/tmp:mode=1777", "--env", "HOME=/tmp",
           "--env", "PYTHONDONTWRITEBYTECODE=1", "--env", "PYTHONUNBUFFERED=1"]
    run += env_options(launched.env)
    for folder in offline_server_labels(image).get("streamlab.mounts", "").split(":"):
        if folder:
            run += bind(folder, folder)
    run += bind(app.workdir, str(app.workdir), readonly=False)
    if app.side_folder is not None:
        run += bind(app.side_folder, str(app.side_folder), readonly=False)  # written while it runs
    return [*run, "--workdir", str(launched.cwd), "--entrypoint", launched.argv[0], image, *launched.argv[1:]]


@contextlib.contextmanager
def run_app(settings: AppSettings, workdir: Path | None = None,
            ready_timeout_s: float = READY_TIMEOUT_S) -> Iterator[RunningApp]:
    """Start the app's container, wait until a real request through it answers, yield, stop."""
    require_engine()
    choice = image_for("apps")
    with prepared(settings, workdir, "docker") as app:
        name = container_name(settings.app, settings.listen_port)
        with container(name, app_run_args(app, choice.image, name), app.workdir, app.ready,
                       ready_timeout_s) as started:
            app.process = started.process
            app.container_pid = started.host_pid()
            try:
                yield app
            finally:
                app.container_pid = 0
