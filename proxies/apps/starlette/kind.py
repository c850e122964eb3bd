"""The Starlette relay as an app hop (proxies.apps.kind): the lab's Python runs `relay_app.py` under uvicorn."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.kind import AppKind
from proxies.apps.launch import WARM_UP, Launch
from proxies.apps.starlette.settings import StarletteSettings
from proxies.apps.versions import python_versions

PROGRAM = "proxies.apps.starlette.relay_app"


def launch(settings: StarletteSettings, workdir: Path, python: str) -> Launch:
    env = {"STREAMLAB_UPSTREAM": settings.upstream, "STREAMLAB_RELAY_MODE": settings.mode,
           "STREAMLAB_RELAY_CHUNK_BYTES": str(settings.chunk_bytes)}
    # One warm-up completion when ready, as for Django's view: the first request pays for the
    # upstream client's connection and lazy imports.
    return Launch([python, "-m", "uvicorn", f"{PROGRAM}:app", "--host", settings.listen_host,
                   "--port", str(settings.listen_port), "--no-access-log",
                   # The upstream's own Date and Server pass through, not a second pair.
                   "--no-server-header", "--no-date-header"], env=env, warm_up=WARM_UP)


KIND = AppKind(
    settings=StarletteSettings, launch=launch,
    # The lab's own environment: the server depends on all three, so there is nothing to install.
    versions=lambda: python_versions("starlette", "uvicorn", "httpx"), needs=())
