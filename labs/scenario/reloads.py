"""A proxy reload at the moment a scenario declares (`Workload.reload_at_s`), while its
streams run: what a deploy does to every proxy on the path."""
from __future__ import annotations

import threading
import time
from typing import Sequence

from proxies.runtime.base import RunningProxy


class ReloadAt:
    """Reloads every hop `at_s` seconds after entering (a timer thread; it only sends a signal,
    so it takes no measurable time from the measuring client). `done_at_s`: when it happened."""

    def __init__(self, hops: Sequence[RunningProxy], at_s: float | None) -> None:
        self.hops, self.at_s = list(hops), at_s
        self.done_at_s: float | None = None
        self.error: str | None = None
        self._timer: threading.Timer | None = None
        self._started = 0.0

    def _reload(self) -> None:
        try:
            for hop in self.hops:
                hop.reload()
            self.done_at_s = time.monotonic() - self._started
        except Exception as exc:  # reported by the check that needs the reload, never swallowed
            self.error = repr(exc)

    def __enter__(self) -> "ReloadAt":
        self._started = time.monotonic()
        if self.at_s is not None and self.hops:
            self._timer = threading.Timer(self.at_s, self._reload)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
