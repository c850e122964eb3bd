"""A Django view that streams an LLM answer, as Django backends commonly write it: the view
forwards the request and returns a `StreamingHttpResponse` over the upstream's body, read with
`requests` in a generator (a synchronous iterator) or with httpx's AsyncClient in an async
generator (an asynchronous iterator). uvicorn serves it under ASGI (`proxies.apps.django.django_app:asgi`),
gunicorn's gthread workers under WSGI (`proxies.apps.django.django_app:wsgi`); the iterator and the
server are the variants (proxies/apps/django/settings.py).

Django serves an iterator of the other kind by consuming it whole first, with a warning in its
log (django/http/response.py, StreamingHttpResponse.__aiter__ and __iter__).

    STREAMLAB_UPSTREAM=http://127.0.0.1:8000   where it forwards
    STREAMLAB_DJANGO_ITERATOR=sync|async        which iterator the view returns
"""
from __future__ import annotations

import os
from typing import AsyncIterator, Iterator

import django
from django.conf import settings
from django.urls import path

UPSTREAM = os.environ.get("STREAMLAB_UPSTREAM", "http://127.0.0.1:8000")
ITERATOR = os.environ.get("STREAMLAB_DJANGO_ITERATOR", "sync")
# How long a silent upstream may keep the view waiting (no lab pauses 300 s without a heartbeat).
UPSTREAM_READ_TIMEOUT_S = 300

settings.configure(
    DEBUG=False, ROOT_URLCONF=__name__, ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    # Django refuses to start without one; this app signs nothing.
    SECRET_KEY="streamlab-django-app-signs-nothing",
    MIDDLEWARE=[], INSTALLED_APPS=[], DATABASES={}, USE_TZ=True,
    # Django's own warnings (the iterator's) reach the app's log, as a deployment's would.
    LOGGING={"version": 1, "disable_existing_loggers": False,
             "handlers": {"console": {"class": "logging.StreamHandler"}},
             "root": {"handlers": ["console"], "level": "WARNING"}},
)
django.setup()

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse  # noqa: E402  (after setup)


def _streaming(content: Iterator[bytes] | AsyncIterator[bytes]) -> StreamingHttpResponse:
    # As Django's docs and most tutorials write it: the generator owns the upstream request, so
    # the answer's status and type are the view's, not the upstream's.
    return StreamingHttpResponse(content, content_type="text/event-stream")


def _sync_forward(request: HttpRequest, rest: str) -> HttpResponse:
    import requests

    method, body, kind = request.method or "GET", request.body, request.content_type or "application/json"

    def chunks() -> Iterator[bytes]:
        with requests.request(method, f"{UPSTREAM}/v1/{rest}", data=body, headers={"Content-Type": kind},
                              stream=True, timeout=(5, UPSTREAM_READ_TIMEOUT_S)) as upstream:
            yield from upstream.iter_content(chunk_size=None)  # each chunk as it arrives
    return _streaming(chunks())


async def _async_forward(request: HttpRequest, rest: str) -> HttpResponse:
    import httpx

    method, body, kind = request.method or "GET", request.body, request.content_type or "application/json"

    async def chunks() -> AsyncIterator[bytes]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(5, read=UPSTREAM_READ_TIMEOUT_S)) as client:
            async with client.stream(method, f"{UPSTREAM}/v1/{rest}", content=body,
                                     headers={"Content-Type": kind}) as upstream:
                async for chunk in upstream.aiter_raw():
                    yield chunk
    return _streaming(chunks())


if ITERATOR not in ("sync", "async"):
    raise SystemExit(f"STREAMLAB_DJANGO_ITERATOR={ITERATOR!r}: expected sync or async")
# A sync view for the sync iterator, an async view for the async one: how each is written.
# No middleware, so no CSRF check to exempt the POST from.
forward = _sync_forward if ITERATOR == "sync" else _async_forward
urlpatterns = [path("v1/<path:rest>", forward)]


def _asgi():  # type: ignore[no-untyped-def]
    from django.core.asgi import get_asgi_application
    return get_asgi_application()


def _wsgi():  # type: ignore[no-untyped-def]
    from django.core.wsgi import get_wsgi_application
    return get_wsgi_application()


asgi = _asgi()
wsgi = _wsgi()
