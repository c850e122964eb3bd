"""The app hop kinds, one row each: everything about a hop is in its folder
(`proxies/apps/<hop>/`, its `kind.py` declares a proxies.apps.kind.AppKind); this table is where
the shared modules find it, as `proxies.kinds.KINDS` is for the proxies."""
from __future__ import annotations

import sys
from pathlib import Path

from proxies.apps.django.kind import KIND as DJANGO
from proxies.apps.express.kind import KIND as EXPRESS
from proxies.apps.gunicorn.kind import KIND as GUNICORN
from proxies.apps.jupyter.kind import KIND as JUPYTER
from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch
from proxies.apps.litellm.kind import KIND as LITELLM
from proxies.apps.nextjs.kind import KIND as NEXTJS
from proxies.apps.privoxy.kind import KIND as PRIVOXY
from proxies.apps.relay.kind import KIND as RELAY
from proxies.apps.settings import AppSettings
from proxies.apps.starlette.kind import KIND as STARLETTE
from proxies.apps.webpack.kind import KIND as WEBPACK

APP_KINDS: dict[str, AppKind] = {kind.name: kind for kind in (
    EXPRESS, NEXTJS, WEBPACK, GUNICORN, DJANGO, JUPYTER, LITELLM, PRIVOXY, RELAY, STARLETTE)}
APP_NAMES: tuple[str, ...] = tuple(APP_KINDS)


def is_app(name: str) -> bool:
    return name in APP_KINDS


def app_kind(name: str) -> AppKind:
    """The hop named `name`; ValueError lists the known ones."""
    if name not in APP_KINDS:
        raise ValueError(f"unknown app {name!r}; known: {', '.join(APP_NAMES)}")
    return APP_KINDS[name]


def app_settings(name: str) -> AppSettings:
    """The defaults of app `name`; ValueError lists the known ones."""
    return app_kind(name).settings()


def launch(settings: AppSettings, workdir: Path, python: str = sys.executable) -> Launch:
    """The Launch of `settings`; `workdir` is the run's own folder (logs, written files)."""
    return app_kind(settings.app).launch(settings, workdir, python)
