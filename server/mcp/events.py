"""The origin's event store: what makes its SSE streams resumable (`--resumable`).

The SDK's `EventStore` interface (mcp/server/streamable_http.py), kept in this process's memory:
with one, the SDK gives every SSE event an `id:`, opens each POST's stream with a priming event
(an id and no data, for the 2025-11-25 revision; the standalone GET gets none), and answers a GET carrying `Last-Event-ID` with the
events of that stream that came after it. Without one, a cut stream is lost. In memory, as the
SDK's own example store is: a replica that restarts, or another replica, knows none of them.
"""
from __future__ import annotations

from collections import deque
from uuid import uuid4

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage

# Events kept, across all streams, oldest dropped first: a lab session sends far fewer.
KEPT_EVENTS = 10_000


class MemoryEventStore(EventStore):
    def __init__(self, kept: int = KEPT_EVENTS) -> None:
        self._events: deque[tuple[EventId, StreamId, JSONRPCMessage | None]] = deque(maxlen=kept)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = uuid4().hex
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        ids = [event_id for event_id, _, _ in self._events]
        if last_event_id not in ids:
            return None
        _, stream_id, _ = self._events[ids.index(last_event_id)]
        for event_id, stream, message in list(self._events)[ids.index(last_event_id) + 1:]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id
