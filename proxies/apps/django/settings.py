"""Django's settings: the server that serves the view and the iterator the view returns."""
from __future__ import annotations

from typing import ClassVar, Literal

from proxies.apps.settings import AppSettings, knob

DJANGO_STREAMING = "https://docs.djangoproject.com/en/5.2/ref/request-response/#streaminghttpresponse-objects"


class DjangoSettings(AppSettings):
    """proxies/apps/django/django_app.py: a Django view returning a StreamingHttpResponse over the upstream."""

    app: ClassVar[str] = "django"
    server: Literal["asgi", "wsgi"] = knob(
        "asgi", "asgi: uvicorn serves `django_app:asgi`; wsgi: gunicorn's gthread workers serve "
        "`django_app:wsgi`", DJANGO_STREAMING)
    iterator: Literal["sync", "async"] = knob(
        "sync", "sync: a sync view returns a generator over `requests`' iter_content; async: an "
        "async view returns an async generator over httpx's aiter_raw", DJANGO_STREAMING)
