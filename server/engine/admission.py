"""Admission: the slots and the bounded FIFO queue in front of them.

At most `slots` sequences hold a slot (and with it KV cache); the rest wait, oldest first, in a
queue of at most `max_queue` entries. `enqueue` raises QueueFull at once when both are full, so the
HTTP layer can answer 429 before it streams any byte.

Sequences are enqueued from the event loop and admitted by the decode loop thread. `cond` guards
the queue and the set of generations in flight, and is what the decode loop waits on when there is
nothing to do; the count of slots in use changes on the decode loop thread only.
"""
from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING

from server import metrics
from server.engine.base import QueueFull

if TYPE_CHECKING:
    from server.engine.generation import Sequence
    from server.engine.generation import ScheduledGeneration

# The Retry-After hint of a 429: a slot frees up every so often, and HTTP counts in seconds.
RETRY_AFTER_S = 1.0


class Admission:
    def __init__(self, slots: int, max_queue: int) -> None:
        if slots < 1 or max_queue < 0:
            raise ValueError("slots must be >= 1 and max_queue >= 0")
        self.slots = slots
        self.max_queue = max_queue
        self.cond = threading.Condition()
        self._waiting: collections.deque[Sequence] = collections.deque()  # guarded by cond
        self._in_flight: set[ScheduledGeneration] = set()  # submitted, not ended; guarded by cond
        self.in_use = 0  # slots held (decode loop thread only)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def enqueue(self, seq: Sequence, wake: bool = True) -> None:
        """Queue a new sequence for a slot, or raise QueueFull (event loop thread). `wake=False`:
        the caller wakes the decode loop itself (once for many submits)."""
        with self.cond:
            free = self.slots - self.in_use
            # Admission happens on the loop thread, so count the waiting ones against free
            # slots too: a burst of submits between two iterations must not overfill the queue.
            if len(self._waiting) >= free + self.max_queue:
                raise QueueFull(retry_after_s=RETRY_AFTER_S)
            self._waiting.append(seq)
            self._in_flight.add(seq.generation)
            metrics.QUEUED_REQUESTS.set(len(self._waiting))
            if wake:
                self.cond.notify_all()

    def withdraw(self, seq: Sequence) -> bool:
        """Take a cancelled sequence out of the queue (caller holds cond). False when it is not
        waiting any more: it holds a slot, and the decode loop ends it."""
        try:
            self._waiting.remove(seq)
        except ValueError:
            return False
        metrics.QUEUED_REQUESTS.set(len(self._waiting))
        self._in_flight.discard(seq.generation)
        return True

    def admit(self) -> list[Sequence]:
        """Give the free slots to the oldest waiting sequences (decode loop; caller holds cond)."""
        if not self._waiting:  # the common case, every iteration: no gauge to set
            return []
        admitted: list[Sequence] = []
        while self._waiting and self.in_use < self.slots:
            admitted.append(self._waiting.popleft())
            self.in_use += 1
        metrics.QUEUED_REQUESTS.set(len(self._waiting))
        metrics.SLOTS_IN_USE.set(self.in_use)
        return admitted

    def free_slot(self) -> None:
        """A sequence that held a slot has ended (decode loop)."""
        self.in_use -= 1
        metrics.SLOTS_IN_USE.set(self.in_use)

    def forget(self, gen: ScheduledGeneration) -> None:
        """The generation has ended: it is no longer in flight."""
        with self.cond:
            self._in_flight.discard(gen)

    def drain(self) -> list[ScheduledGeneration]:
        """Empty the queue and the slots; returns every generation that was in flight (the engine
        is stopping; caller holds cond)."""
        gens = list(self._in_flight)
        self._in_flight.clear()
        self._waiting.clear()
        self.in_use = 0
        metrics.SLOTS_IN_USE.set(0)
        metrics.QUEUED_REQUESTS.set(0)
        return gens
