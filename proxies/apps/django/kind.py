"""Django as an app hop (proxies.apps.kind): `django_app.py` under uvicorn (ASGI) or gunicorn (WSGI)."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.django.settings import DjangoSettings
from proxies.apps.gunicorn.kind import LOGGING
from proxies.apps.kind import AppKind
from proxies.apps.launch import WARM_UP, Launch
from proxies.apps.versions import python_versions

PROGRAM = "proxies.apps.django.django_app"


def launch(settings: DjangoSettings, workdir: Path, python: str) -> Launch:
    env = {"STREAMLAB_UPSTREAM": settings.upstream, "STREAMLAB_DJANGO_ITERATOR": settings.iterator}
    # The view's first completion pays for its lazy imports and upstream client: a fresh-clone
    # CI run measured the async view's first event at 429 ms (0.36-0.63 s by hand), past a
    # streamed check's limit. One warm-up completion when ready, as for LiteLLM.
    if settings.server == "asgi":
        return Launch([python, "-m", "uvicorn", f"{PROGRAM}:asgi", "--host", settings.listen_host,
                       "--port", str(settings.listen_port)], env=env, warm_up=WARM_UP)
    # Threads, so that a stream does not hold the only worker (gunicorn-sync-timeout's failure).
    return Launch([python, "-m", "gunicorn", "--bind", settings.listen, "--worker-class", "gthread",
                   "--threads", "50", *LOGGING, f"{PROGRAM}:wsgi"], env=env, warm_up=WARM_UP)


KIND = AppKind(
    settings=DjangoSettings, launch=launch,
    versions=lambda: python_versions("django", "uvicorn", "gunicorn", "requests", "httpx"),
    needs=("python-apps",))
