"""gunicorn's settings: the worker model and timeout its variants switch."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import model_validator
from typing_extensions import Self

from proxies.apps.settings import AppSettings, knob

GUNICORN = "https://docs.gunicorn.org/en/stable/settings.html"


class GunicornSettings(AppSettings):
    """proxies/apps/gunicorn/wsgi_app.py (Flask, a generator over `requests` streaming) under gunicorn."""

    app: ClassVar[str] = "gunicorn"
    worker_class: Literal["sync", "gthread", "gevent"] = knob("sync", "--worker-class", f"{GUNICORN}#worker-class")
    workers: int = knob(1, "--workers", f"{GUNICORN}#workers", ge=1, le=64)
    threads: int = knob(1, "--threads (gthread only)", f"{GUNICORN}#threads", ge=1, le=1000)
    timeout_s: int = knob(30, "--timeout: a worker silent this long is killed and restarted",
                          f"{GUNICORN}#timeout", ge=0, le=3600)

    @model_validator(mode="after")
    def _threads_need_gthread(self) -> Self:
        if self.threads > 1 and self.worker_class == "sync":
            # gunicorn itself switches to gthread when --threads > 1 with the sync class: say so.
            raise ValueError("threads > 1 with worker_class sync: gunicorn would silently run gthread; "
                             "name worker_class gthread")
        return self
