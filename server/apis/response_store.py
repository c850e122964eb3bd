"""The Responses API's stored responses: what `GET /v1/responses/{id}` reads, for a window.

A response is kept from its admission (its request, to regenerate it) until `window_s` after it;
its final object replaces the placeholder when it ends. Resuming a stream
(`GET /v1/responses/{id}?stream=true&starting_after=N`) regenerates the answer from the kept
request and skips the events up to N: the lab's answers are deterministic (a script, or a seed:
the synthetic engine always), as the SSE writer's event ids already assume
(server/stream/sse_writer.py). A server whose answers are sampled would keep the events instead.
Bounded: past `limit` entries, or `limit_bytes` of kept request bodies, the oldest go first (a
request may be 8 MiB: 1,024 of them would be 8 GiB).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from server.apis.responses import ResponsesRequest, response_object

DEFAULT_WINDOW_S = 600.0  # OpenAI keeps background responses ~10 minutes for resuming
MAX_STORED = 1024
MAX_STORED_BYTES = 64 * 1024 * 1024


@dataclass
class StoredResponse:
    request: ResponsesRequest
    created: int
    stored_at: float  # time.monotonic()
    size: int  # the request body's bytes, what keeping it costs roughly
    final: dict[str, Any] | None = None  # None while it runs

    def keep(self, final: dict[str, Any]) -> None:
        """The reply's final object (server/stream/completion_job.py `CompletionJob.keep`)."""
        self.final = final

    def current(self, response_id: str) -> dict[str, Any]:
        """The object a GET returns: the final one, else an `in_progress` placeholder."""
        if self.final is not None:
            return self.final
        return response_object(response_id, self.created, self.request.model, "in_progress")


class ResponseStore:
    def __init__(self, window_s: float = DEFAULT_WINDOW_S, limit: int = MAX_STORED,
                 limit_bytes: int = MAX_STORED_BYTES) -> None:
        self.window_s = window_s
        self.limit = limit
        self.limit_bytes = limit_bytes
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._bytes = 0

    def add(self, response_id: str, request: ResponsesRequest, created: int,
            size: int) -> StoredResponse:
        self._expire()
        entry = StoredResponse(request, created, time.monotonic(), size)
        self._entries[response_id] = entry
        self._bytes += size
        while len(self._entries) > self.limit or (self._bytes > self.limit_bytes
                                                  and len(self._entries) > 1):
            self._drop_oldest()
        return entry

    def get(self, response_id: str) -> StoredResponse | None:
        """The entry, or None: never stored, or older than the window."""
        self._expire()
        return self._entries.get(response_id)

    def _expire(self) -> None:
        oldest = time.monotonic() - self.window_s
        while self._entries:
            first = next(iter(self._entries.values()))
            if first.stored_at >= oldest:
                return
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        _, entry = self._entries.popitem(last=False)
        self._bytes -= entry.size
