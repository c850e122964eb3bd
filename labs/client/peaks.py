"""The peaks of server gauges while a workload runs: how much of the load reached the server at once.

A gauge read after the run says nothing (the streams are over by then); its peak says how many
streams, or file descriptors, were in flight together, which is what a concurrency limit is
about. A thread reads /metrics every `interval_s` over one kept-alive connection of its own,
opened before the run's counters are read, so scraping costs the server one socket (even at its
fd limit) and never shows in its count of accepted connections.

    with GaugePeaks("127.0.0.1", 8000, ["streamlab_active_streams"], interval_s=0.05) as peaks:
        ...  # the workload
    peaks.peaks["streamlab_active_streams"]
"""
from __future__ import annotations

import http.client
import threading
from typing import Sequence


class GaugePeaks:
    """The highest value each of `names` reached on /metrics, sampled in a thread.

    A scrape that fails (the server busy, or out of descriptors) is skipped and counted in
    `failed`; a gauge never read is absent from `peaks`, so a check on it fails visibly.
    """

    def __init__(self, host: str, port: int, names: Sequence[str], interval_s: float) -> None:
        self.host, self.port, self.names = host, port, tuple(names)
        self.interval_s = interval_s
        self.peaks: dict[str, float] = {}
        self.samples = 0
        self.failed = 0
        self._connection: http.client.HTTPConnection | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gauge-peaks", daemon=True)

    def __enter__(self) -> GaugePeaks:
        if self.names:  # nothing asked for: no thread, no connection
            self._sample()  # connects now, before the caller reads the counters
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.names:
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        if self._connection is not None:
            self._connection.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        try:
            text = self._scrape()
        except (http.client.HTTPException, OSError):
            self.failed += 1
            if self._connection is not None:
                self._connection.close()
            self._connection = None  # reconnect on the next sample
            return
        self.samples += 1
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name in self.names:
                self.peaks[name] = max(self.peaks.get(name, float("-inf")), float(value))

    def _scrape(self) -> str:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self.host, self.port, timeout=5)
        self._connection.request("GET", "/metrics")
        response = self._connection.getresponse()
        return response.read().decode()
