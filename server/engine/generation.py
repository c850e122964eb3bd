"""One request in flight, from both sides: the Sequence the decode loop steps, and the
ScheduledGeneration the HTTP layer holds, the asyncio side of it.

The decode loop (server/engine/scheduler.py) hands its events over in batches, one
`call_soon_threadsafe(deliver_all, ...)` per loop iteration; each generation appends them to its
own buffer, which `async for` reads. The buffer is a deque and one future to wake its single
reader: an asyncio.Queue did the same with a getter deque, a putter deque and an Event per
generation, and a wake-up path that cost ~1 us more per token.
"""
from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Protocol

from server.engine.base import EngineStopped, FinishReason, Generation, GenerationRequest, TokenEvent


class Canceller(Protocol):
    """What runs a generation (the scheduler): its cancel() is where a generation's lands."""

    def cancel(self, gen: "ScheduledGeneration", reason: str) -> None: ...


# Items on a generation's asyncio queue besides TokenEvent.
@dataclass(frozen=True)
class End:
    """Generation is over for this reason (error: what went wrong)."""

    reason: FinishReason
    error: str | None = None


@dataclass(frozen=True)
class Stopped:
    """The engine stopped under the generation: iterating raises EngineStopped."""

    message: str


@dataclass(eq=False)
class Sequence:
    """One admitted or queued request, as the decode loop sees it. Touched by the loop thread only,
    except `cancelled`, `cancel_reason` and `client_gone_at` (set from the event loop)."""

    id: int
    request: GenerationRequest
    generation: "ScheduledGeneration"
    # Set when the sequence gets a slot; pacing is relative to this moment.
    started_at: float = 0.0
    due: float = 0.0
    generated: int = 0
    cancelled: bool = False
    cancel_reason: str = ""
    client_gone_at: float | None = None
    finished: bool = False
    # Backend-private state (KV cache, position, RNG, ...).
    state: Any = None
    # The request's max_new_tokens, lowered by the backend when the model has fewer positions.
    max_new_tokens: int = -1

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            self.max_new_tokens = self.request.max_new_tokens

    def next_due(self, now: float) -> float:
        """When the token after the one just emitted is due (its pacing)."""
        pacing = self.request.pacing
        period = 1.0 / pacing.tokens_per_s if pacing.tokens_per_s else 0.0
        # Anchored to the schedule (no drift from step time), but never more than one period
        # behind now: an engine that fell behind resumes the rate instead of bursting.
        due = max(self.due + period, now - period) if period else now
        if pacing.pause_after_tokens is not None and self.generated == pacing.pause_after_tokens:
            due = max(due, now) + pacing.pause_s
        return due

    @property
    def next_forced_id(self) -> int | None:
        forced = self.request.forced_ids
        if forced is None:
            return None
        return forced[self.generated]


class ScheduledGeneration(Generation):
    def __init__(self, scheduler: Canceller, request: GenerationRequest) -> None:
        self._scheduler = scheduler
        self._items: collections.deque[TokenEvent | End | Stopped] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None  # the reader, waiting for an item
        self._prompt_tokens = len(request.prompt_ids)
        self._completion_tokens = 0
        self.finish_reason: FinishReason | None = None
        self.error: str | None = None  # what went wrong when finish_reason == "error"
        self.seq: Sequence | None = None  # set by Scheduler.submit
        # A reader that can take a token at once, without being woken (server/stream/streaming.py):
        # called with the token id; True: taken, False: declined, None: dropped.
        self._taker: Callable[[int], bool | None] | None = None

    def take_with(self, taker: Callable[[int], bool | None] | None) -> None:
        """While the reader waits in `async for` with nothing buffered, offer each token to
        `taker` first. What it takes counts as read; what it declines is buffered and wakes the
        reader as before; what it drops (after the reader's stop) is as if never read, as for a
        reader that stopped iterating."""
        self._taker = taker

    # Called on the event loop thread with events from the decode loop.
    def deliver(self, item: TokenEvent | End | Stopped) -> None:
        if (self._taker is not None and self._waiter is not None and not self._items
                and type(item) is TokenEvent):
            taken = self._taker(item.token_id)
            if taken:
                self._completion_tokens += 1
                return
            if taken is None:
                return
        # The outcome is known as soon as the loop says so, even if nobody reads the rest
        # (a cancelled generation is usually not iterated any more).
        if isinstance(item, End):
            self.finish_reason, self.error = item.reason, item.error
            self.seq = None  # the decode loop is done with it; no cycle with seq.generation
        elif isinstance(item, Stopped):
            self.finish_reason, self.error = "error", item.message
            self.seq = None
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def _next(self) -> TokenEvent | End | Stopped:
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:  # cancelled while waiting
                    self._waiter = None
        return self._items.popleft()

    async def _iterate(self) -> AsyncIterator[TokenEvent]:
        items = self._items
        while True:
            item = items.popleft() if items else await self._next()
            if type(item) is TokenEvent:
                self._completion_tokens += 1
                yield item
            elif isinstance(item, End):
                return
            else:
                raise EngineStopped(item.message)

    def __aiter__(self) -> AsyncIterator[TokenEvent]:
        # Deliberately no cancel() when the consumer stops iterating: the server's
        # "no disconnect handling" failure mode relies on generation going on unread.
        return self._iterate()

    def cancel(self, reason: str = "disconnect") -> None:
        self._scheduler.cancel(self, reason)

    def mark_client_gone(self) -> None:
        """The client has gone but generation goes on (failure mode): count what follows."""
        if self.seq is not None and self.seq.client_gone_at is None:
            self.seq.client_gone_at = time.monotonic()

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def prompt_tokens(self) -> int:
        return self._prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self._completion_tokens


def deliver_all(events: list[tuple[ScheduledGeneration, Any]]) -> None:
    """Hand one loop iteration's events to their generations (on the event loop thread)."""
    for gen, item in events:
        gen.deliver(item)
