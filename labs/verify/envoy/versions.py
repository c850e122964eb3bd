"""Envoy's defaults by version: the ones verify reads on a streaming route (labs/verify/versions.py
says how they are used).

Read from Envoy's changelogs (`changelogs/1.26.0.yaml` .. `1.40.0.yaml`) and its API protos
(data-plane-api, 2023-04 against 2026-01), 2026-12-02; checked on the 1.40.0 binary here (a 20 s
stream cut at ~15 s by the route timeout; a departure closed the upstream connection). None of the
defaults below changed from 1.26 (April 2023) to 1.40 (October 2026), so `--proxy-version` of any
of them judges the same and the measurement with the binary here stands for it. What did change in
that range, and is not read here: HTTP/2 `max_concurrent_streams` 2147483647 -> 1024 and the
initial stream / connection windows 256 MiB -> 16 / 24 MiB (1.36.0, permanent from 1.40.0); the
new `stream_flush_timeout` (1.36.0), which falls back to `stream_idle_timeout` when unset.
"""
from __future__ import annotations

from labs.verify.versions import DefaultsTable, shown

__all__ = ["BASE", "TABLE", "shown"]

# Written as a user would write them; the reading parses them (durations in seconds).
BASE: dict[str, str] = {
    "route timeout": "15s", "route idle_timeout": "", "stream_idle_timeout": "300s",
    "request_timeout": "", "max_stream_duration": "",
    "max_connections": "1024", "max_pending_requests": "1024", "max_requests": "1024",
}
TABLE = DefaultsTable("Envoy", BASE, (), oldest=(1, 26), kind="envoy")
