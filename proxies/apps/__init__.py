"""The applications a lab can put on a path beside the proxies: the layers above them.

An app hop is a small program shipped here whose variants are settings (environment and
arguments, never copied files): an Express backend-for-frontend and a Next.js site
(`proxies/apps/node/`), a Flask app under gunicorn (`wsgi_app.py`), the LiteLLM proxy (its own
virtual environment, `make setup`), and a seeded relay that re-splits the byte stream
(`relay.py`). `proxies.runtime` starts and stops them like the proxies (host processes or
containers), readiness polled on a real request through the app.

    settings = app_settings("express").with_(listen_port=free_port(), upstream_port=8000)
    with get_runtime("local").run_app(settings) as app:
        httpx.post(app.url + "/v1/chat/completions", ...)
"""
from __future__ import annotations

from proxies.apps.settings import APP_NAMES, APP_TYPES, AppName, AppSettings, app_settings, is_app

__all__ = ["APP_NAMES", "APP_TYPES", "AppName", "AppSettings", "app_settings", "is_app"]
