"""The applications a lab can put on a path beside the proxies: the layers above them.

An app hop is a small program shipped here whose variants are settings (environment and
arguments, never copied files): an Express backend-for-frontend and a Next.js site
(`proxies/apps/node/`), a Flask app under gunicorn, the LiteLLM proxy (its own virtual
environment, `make setup`), a seeded relay that re-splits the byte stream, and more. Each is a
folder (`proxies/apps/<hop>/`: its settings and its kind) and a row of `proxies.apps.kinds.APP_KINDS`.
`proxies.runtime` starts and stops them like the proxies (host processes or containers),
readiness polled on a real request through the app.

    settings = app_settings("express").with_(listen_port=free_port(), upstream_port=8000)
    with get_runtime("local").run_app(settings) as app:
        httpx.post(app.url + "/v1/chat/completions", ...)
"""
from __future__ import annotations

from proxies.apps.kinds import APP_KINDS, APP_NAMES, app_kind, app_settings, is_app
from proxies.apps.settings import AppSettings

__all__ = ["APP_KINDS", "APP_NAMES", "AppSettings", "app_kind", "app_settings", "is_app"]
