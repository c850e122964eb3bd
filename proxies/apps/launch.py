"""How each app hop is started: its command line, environment and files, from its settings.

Every runtime reads the same `Launch` (a host process runs it as it is; a container runs it with
the repository mounted at the same path), so an app behaves the same in both.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxies.apps.settings import (AppSettings, DjangoSettings, ExpressSettings, GunicornSettings,
                                   JupyterSettings, LitellmSettings, NextjsSettings, PrivoxySettings, RelaySettings,
                                   WebpackSettings)

APPS_DIR = Path(__file__).resolve().parent
REPO_ROOT = APPS_DIR.parents[1]
NODE_DIR = APPS_DIR / "node"
NODE_MODULES = NODE_DIR / "node_modules"
NEXT_SITE = NODE_DIR / "next-site"
# `make setup` builds the site once into NEXT_BUILD; Next insists its distDir lies inside the
# workspace (this folder), so each running site's own dist folder is made under NEXT_RUNS.
NEXT_BUILD = NODE_DIR / ".next-build"
NEXT_RUNS = NODE_DIR / ".next-runs"
# The build's rewrite destination; each start sets the run's upstream in its place (see next_dist).
NEXT_PLACEHOLDER = "http://upstream.streamlab.invalid:9"
LITELLM_VENV = REPO_ROOT / ".venvs" / "litellm"
# LiteLLM refuses to start without a master key; this one never leaves loopback.
LITELLM_KEY = "sk-streamlab-local"
READY_PATH = "/v1/models"
# Privoxy's action and filter files as Debian ships them, read where they are (nothing under /etc
# is written); the run's own user.action and config sit in its folder.
PRIVOXY_ETC = Path("/etc/privoxy")
PRIVOXY_SHIPPED = ("match-all.action", "default.action", "default.filter")


class AppMissing(RuntimeError):
    """An app's program or packages are not installed; the message says what to run."""


@dataclass(frozen=True)
class Launch:
    """What to run for one app hop: argv (argv[0] a path), extra environment, files to write into
    the work folder first, the folder to run in, and headers its readiness request needs."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO_ROOT
    ready_headers: dict[str, str] = field(default_factory=dict)
    warm_up: dict[str, Any] | None = None  # a completion body sent once when ready (any answer will do)
    # A forward proxy's origin: clients reach `forward_origin` through the app (absolute-form
    # requests, as with HTTP_PROXY set), not the app as the origin itself.
    forward_origin: str | None = None
    # Where the app serves the upstream's paths (jupyter-server-proxy: /proxy/PORT); "" for the root.
    url_path: str = ""

    def shown(self) -> str:
        """The app's "config" as a report shows it: environment, command line, written files."""
        lines = [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        lines.append(shlex.join(self.argv))
        for name, text in self.files.items():
            lines += ["", f"# {name}", text.rstrip()]
        return "\n".join(lines) + "\n"


def node_binary() -> str:
    found = shutil.which("node")
    if not found:
        raise AppMissing("no `node` on PATH: install Node.js 20 or later (Debian: apt-get install nodejs npm)")
    return os.path.realpath(found)


def _require(path: Path, what: str) -> None:
    if not path.exists():
        raise AppMissing(f"{what} is not installed ({path} is missing): run `make setup`")


def launch(settings: AppSettings, workdir: Path, python: str = sys.executable) -> Launch:
    """The Launch of `settings`; `workdir` is the run's own folder (logs, written files)."""
    listen = f"{settings.listen_host}:{settings.listen_port}"
    if isinstance(settings, ExpressSettings):
        _require(NODE_MODULES / "express", "Express")
        return Launch([node_binary(), str(NODE_DIR / "express-app.mjs")], cwd=NODE_DIR, env={
            "STREAMLAB_LISTEN": listen, "STREAMLAB_UPSTREAM": settings.upstream,
            "STREAMLAB_COMPRESSION": settings.compression,
            "STREAMLAB_ABORT_ON_CLOSE": "1" if settings.abort_on_close else "0",
            "STREAMLAB_FORWARD": settings.forward})
    if isinstance(settings, NextjsSettings):
        _require(NEXT_BUILD / "BUILD_ID", "the Next.js site's build")
        dist = NEXT_RUNS / workdir.name
        return Launch([node_binary(), str(NODE_MODULES / "next" / "dist" / "bin" / "next"), "start",
                       str(NEXT_SITE), "-H", settings.listen_host, "-p", str(settings.listen_port)],
                      cwd=NODE_DIR, env={
                          "NEXT_TELEMETRY_DISABLED": "1", "STREAMLAB_UPSTREAM": settings.upstream,
                          "STREAMLAB_NEXT_COMPRESS": "1" if settings.compress else "0",
                          "STREAMLAB_NEXT_ROUTE": settings.route,
                          "STREAMLAB_NEXT_DIST": os.path.relpath(dist, NEXT_SITE)})
    if isinstance(settings, WebpackSettings):
        _require(NODE_MODULES / "webpack-dev-server", "webpack-dev-server")
        return Launch([node_binary(), str(NODE_DIR / "dev-server.mjs")], cwd=NODE_DIR, env={
            "STREAMLAB_LISTEN": listen, "STREAMLAB_UPSTREAM": settings.upstream,
            "STREAMLAB_COMPRESS": "1" if settings.compress else "0"})
    if isinstance(settings, GunicornSettings):
        args = [python, "-m", "gunicorn", "--bind", listen, "--worker-class", settings.worker_class,
                "--workers", str(settings.workers), "--timeout", str(settings.timeout_s),
                # Access lines on stdout (process.log); no control socket in the repository.
                "--access-logfile", "-", "--no-control-socket"]
        if settings.worker_class == "gthread":
            args += ["--threads", str(settings.threads)]
        return Launch([*args, "proxies.apps.wsgi_app:app"], env={"STREAMLAB_UPSTREAM": settings.upstream})
    if isinstance(settings, DjangoSettings):
        env = {"STREAMLAB_UPSTREAM": settings.upstream, "STREAMLAB_DJANGO_ITERATOR": settings.iterator}
        # The view's first completion pays for its lazy imports and upstream client: a fresh-clone
        # CI run measured the async view's first event at 429 ms (0.36-0.63 s by hand), past a
        # streamed check's limit. One warm-up completion when ready, as for LiteLLM.
        warm_up = {"model": "streamlab-warm-up", "max_tokens": 1,
                   "messages": [{"role": "user", "content": "warm up"}]}
        if settings.server == "asgi":
            return Launch([python, "-m", "uvicorn", "proxies.apps.django_app:asgi", "--host",
                           settings.listen_host, "--port", str(settings.listen_port)], env=env,
                          warm_up=warm_up)
        # Threads, so that a stream does not hold the only worker (gunicorn-sync-timeout's failure).
        return Launch([python, "-m", "gunicorn", "--bind", listen, "--worker-class", "gthread",
                       "--threads", "50", "--access-logfile", "-", "--no-control-socket",
                       "proxies.apps.django_app:wsgi"], env=env, warm_up=warm_up)
    if isinstance(settings, JupyterSettings):
        # No token, no browser, every Jupyter folder in the run's own (nothing under ~).
        return Launch([python, "-m", "jupyter_server", "--no-browser", "--allow-root",
                       "--ip", settings.listen_host, "--port", str(settings.listen_port),
                       # A POST without an _xsrf cookie is refused otherwise; the lab stays on loopback.
                       "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
                       "--ServerApp.disable_check_xsrf=True",
                       f"--ServerApp.root_dir={workdir}"],
                      env={"JUPYTER_CONFIG_DIR": str(workdir / "config"), "JUPYTER_DATA_DIR": str(workdir / "data"),
                           "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"), "JUPYTER_PLATFORM_DIRS": "1"},
                      url_path=f"/proxy/{settings.upstream_port}")
    if isinstance(settings, LitellmSettings):
        litellm = LITELLM_VENV / "bin" / "litellm"
        _require(litellm, "The LiteLLM proxy")
        config = {
            # Every model name the client asks for goes to the upstream's OpenAI-compatible API.
            "model_list": [{"model_name": "*", "litellm_params": {
                "model": "openai/*", "api_base": f"{settings.upstream}/v1", "api_key": "none"}}],
            "general_settings": {"master_key": LITELLM_KEY},
        }
        if settings.keepalive_ping_s is not None:
            config["litellm_settings"] = {"sse_keepalive_ping_interval_seconds": settings.keepalive_ping_s}
        return Launch(
            [str(litellm), "--config", str(workdir / "litellm.yaml"), "--host", settings.listen_host,
             "--port", str(settings.listen_port), "--num_workers", "1"],
            # Its cost map from the package, not the network; no telemetry; the key it insists on.
            env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MASTER_KEY": LITELLM_KEY,
                 "LITELLM_TELEMETRY": "False", "LITELLM_LOG": "ERROR", "NO_PROXY": "*"},
            # JSON is YAML: what LiteLLM reads is exactly what the report shows.
            files={"litellm.yaml": json.dumps(config, indent=2)}, cwd=workdir,
            ready_headers={"Authorization": f"Bearer {LITELLM_KEY}"},
            # Its first completion pays for lazy imports and its upstream client: measured 0.8 s
            # idle (60 ms after), several seconds on a loaded machine, enough for a proxy's read
            # timeout in front of it to cut before the headers. The server answers a 404 for the
            # unknown model; the runs count the server's metrics from after this.
            warm_up={"model": "streamlab-warm-up", "max_tokens": 1,
                     "messages": [{"role": "user", "content": "warm up"}]})
    if isinstance(settings, PrivoxySettings):
        return privoxy(settings, workdir)
    if isinstance(settings, RelaySettings):
        args = [python, "-m", "proxies.apps.relay", "--listen", listen,
                "--upstream", f"{settings.upstream_host}:{settings.upstream_port}",
                "--seed", str(settings.seed), "--upstream-http", settings.upstream_http]
        if settings.split is not None:
            args += ["--split", f"{settings.split[0]}-{settings.split[1]}"]
        return Launch(args)
    raise TypeError(f"no launch for {type(settings).__name__}")


def privoxy(settings: PrivoxySettings, workdir: Path) -> Launch:
    """Privoxy in the foreground: Debian's action and filter files, the run's user.action and
    config in its own folder (its confdir, relative: the reports of two runs diff cleanly)."""
    binary = shutil.which("privoxy") or "/usr/sbin/privoxy"
    _require(Path(binary), "Privoxy (Debian: apt-get install privoxy)")
    for name in PRIVOXY_SHIPPED:
        _require(PRIVOXY_ETC / name, f"Privoxy's {name}")
    user = (f"# The upstream's answers skip every content filter.\n{{ -filter }}\n{settings.upstream_host}\n"
            if settings.unfiltered_upstream else "# Nothing of the run's own.\n")
    # Debian's /etc/privoxy/config less its comments, with the run's folder and address. No
    # logfile: what Privoxy logs goes to stderr, the run's process log.
    config = "\n".join([
        "confdir .", *(f"actionsfile {PRIVOXY_ETC / name}" for name in PRIVOXY_SHIPPED[:2]),
        "actionsfile user.action", f"filterfile {PRIVOXY_ETC / PRIVOXY_SHIPPED[2]}",
        f"listen-address {settings.listen_host}:{settings.listen_port}",
        "toggle 1", "enable-remote-toggle 0", "enable-remote-http-toggle 0", "enable-edit-actions 0",
        "enforce-blocks 0", "buffer-limit 4096", "enable-proxy-authentication-forwarding 0",
        "forwarded-connect-retries 0", "accept-intercepted-requests 0", "allow-cgi-request-crunching 0",
        "split-large-forms 0", "keep-alive-timeout 5", "tolerate-pipelining 1", "socket-timeout 300", ""])
    return Launch([os.path.realpath(binary), "--no-daemon", "config"],
                  files={"user.action": user, "config": config}, cwd=workdir,
                  forward_origin=settings.upstream)


def next_dist(dist: Path, upstream: str) -> Path:
    """A running site's own dist folder: the setup build linked in, the rewrite set to `upstream`.

    `rewrites()` is evaluated by `next build` and its destination baked into the build's
    manifests (measured: `next start` with another STREAMLAB_UPSTREAM still went to the build's),
    and a build takes ~20-30 s. So setup builds once against a placeholder, and each start links
    that build here with the placeholder in the three manifests replaced by the run's upstream.
    """
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    for entry in NEXT_BUILD.iterdir():
        if entry.name in ("cache", "trace", "trace-build"):
            continue  # what Next writes while it runs stays with this run
        if entry.is_file() and NEXT_PLACEHOLDER in (text := entry.read_text(errors="replace")):
            (dist / entry.name).write_text(text.replace(NEXT_PLACEHOLDER, upstream))
        else:
            (dist / entry.name).symlink_to(entry)
    (dist / "cache").mkdir()
    return dist
