"""Slots, a bounded queue, pacing and cancellation: the decode loop both engines share.

An engine is this scheduler plus a Backend that knows how to prefill a sequence and how to compute
the next token for a batch of sequences (a model forward pass, or a table look-up for the
synthetic engine). The scheduler decides *when* and *which*:

* Slots: at most `slots` sequences are admitted (hold KV cache); the rest wait in a FIFO queue of
  at most `max_queue` entries. `submit` raises QueueFull at once when both are full, so the HTTP
  layer can answer 429 before it streams any byte.
* Pacing lives in the loop: each sequence has a due time for its next token, and a token is
  computed only when it is due. Nothing is computed ahead, so a client that stops reading never
  makes the engine run ahead, and a cancel finds at most one token in flight.
* Batching: every iteration steps all sequences that are due (within a small tolerance) in one
  Backend.step call, so unpaced sequences share every forward pass.
* Threading: the loop runs on its own thread (never the event loop), except in the
  `blocking_loop` failure mode. Tokens reach asyncio through one `call_soon_threadsafe` per loop
  iteration (a batch of events), into an asyncio.Queue per generation.
* Cancellation: `cancel()` flags the sequence and wakes the loop; the slot is freed at the start
  of the next iteration, i.e. within one decode step (at once if the loop was waiting).
"""
from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from server import metrics
from server.engine.backend import Backend, Sequence
from server.engine.base import (
    Engine,
    EngineStopped,
    FinishReason,
    Generation,
    GenerationRequest,
    QueueFull,
    TokenEvent,
)

log = logging.getLogger(__name__)

# Sequences due within this much of now are stepped together with the ones already due: a token
# up to 1 ms early is invisible at any lab rate, and it lets paced streams share forward passes.
BATCH_TOLERANCE_S = 0.001


# Items on a generation's asyncio queue besides TokenEvent.
@dataclass(frozen=True)
class _End:
    reason: FinishReason
    error: str | None = None


@dataclass(frozen=True)
class _Stopped:
    message: str


class ScheduledGeneration(Generation):
    def __init__(self, scheduler: "Scheduler", request: GenerationRequest) -> None:
        self._scheduler = scheduler
        self._queue: asyncio.Queue[TokenEvent | _End | _Stopped] = asyncio.Queue()
        self._prompt_tokens = len(request.prompt_ids)
        self._completion_tokens = 0
        self.finish_reason: FinishReason | None = None
        self.error: str | None = None  # what went wrong when finish_reason == "error"
        self.seq: Sequence | None = None  # set by Scheduler.submit

    # Called on the event loop thread with events from the decode loop.
    def _deliver(self, item: TokenEvent | _End | _Stopped) -> None:
        # The outcome is known as soon as the loop says so, even if nobody reads the rest
        # (a cancelled generation is usually not iterated any more).
        if isinstance(item, _End):
            self.finish_reason, self.error = item.reason, item.error
        elif isinstance(item, _Stopped):
            self.finish_reason, self.error = "error", item.message
        self._queue.put_nowait(item)

    async def _iterate(self) -> AsyncIterator[TokenEvent]:
        while True:
            item = await self._queue.get()
            if isinstance(item, TokenEvent):
                self._completion_tokens += 1
                yield item
            elif isinstance(item, _End):
                return
            else:
                raise EngineStopped(item.message)

    def __aiter__(self) -> AsyncIterator[TokenEvent]:
        # Deliberately no cancel() when the consumer stops iterating: the server's
        # "no disconnect handling" failure mode relies on generation going on unread.
        return self._iterate()

    def cancel(self, reason: str = "disconnect") -> None:
        self._scheduler._cancel(self, reason)

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


class Scheduler(Engine):
    """The Engine implementation: a Backend driven by a paced, batched decode loop."""

    def __init__(self, name: str, backend: Backend, slots: int, max_queue: int,
                 blocking_loop: bool = False) -> None:
        if slots < 1 or max_queue < 0:
            raise ValueError("slots must be >= 1 and max_queue >= 0")
        self.name = name
        self.slots = slots
        self.max_queue = max_queue
        self.backend = backend
        self.blocking_loop = blocking_loop
        self._cond = threading.Condition()
        self._waiting: collections.deque[Sequence] = collections.deque()  # guarded by _cond
        self._active: list[Sequence] = []  # the slots; loop thread only
        self._due_heap: list[tuple[float, int, Sequence]] = []  # loop thread only
        self._slots_in_use = 0
        self._ids = itertools.count()
        self._stopping = False
        self._running = False
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake_async: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[ScheduledGeneration, Any]] = []  # events of this iteration
        self._generations: set[ScheduledGeneration] = set()  # in flight, guarded by _cond
        self.steps = 0  # forward steps run (for benchmarks and tests)
        self.last_step_s = 0.0
        # (batch size, seconds) of recent steps, for the benchmark.
        self.step_times: collections.deque[tuple[int, float]] = collections.deque(maxlen=4096)

    # ---- Engine API (event loop thread) ---------------------------------------------------

    async def start(self) -> None:
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.backend.load)
        metrics.SLOTS_TOTAL.set(self.slots)
        metrics.SLOTS_IN_USE.set(0)
        metrics.QUEUED_REQUESTS.set(0)
        self._stopping = False
        self._running = True
        if self.blocking_loop:
            self._wake_async = asyncio.Event()
            self.backend.enter_thread()
            self._task = asyncio.get_running_loop().create_task(self._run_blocking())
        else:
            self._thread = threading.Thread(target=self._run_thread, name=f"{self.name}-decode",
                                            daemon=True)
            self._thread.start()

    async def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._wake_async is not None:
            self._wake_async.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10.0)
            self._thread = None
        if self._task is not None:
            await self._task
            self._task = None
        self._running = False

    def submit(self, request: GenerationRequest) -> Generation:
        if not self._running:
            raise EngineStopped("the engine is not running")
        if request.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be >= 0")
        gen = ScheduledGeneration(self, request)
        seq = Sequence(id=next(self._ids), request=request, generation=gen)
        gen.seq = seq
        with self._cond:
            free = self.slots - self._slots_in_use
            # Admission happens on the loop thread, so count the waiting ones against free
            # slots too: a burst of submits between two iterations must not overfill the queue.
            if len(self._waiting) >= free + self.max_queue:
                raise QueueFull(retry_after_s=self._retry_after())
            self._waiting.append(seq)
            self._generations.add(gen)
            metrics.QUEUED_REQUESTS.set(len(self._waiting))
            self._cond.notify_all()
        if self._wake_async is not None:
            self._wake_async.set()
        return gen

    @property
    def healthy(self) -> bool:
        return self._running and not self._stopping

    @property
    def slots_in_use(self) -> int:
        return self._slots_in_use

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "slots": self.slots, "max_queue": self.max_queue,
                **self.backend.describe()}

    def _retry_after(self) -> float:
        # A rough hint: one slot frees up every so often; never less than a second (HTTP's unit).
        return 1.0

    def _cancel(self, gen: ScheduledGeneration, reason: str) -> None:
        seq = gen.seq
        if seq is None or gen.done:
            return
        now = time.monotonic()
        with self._cond:
            if seq.finished or seq.cancelled:
                return
            seq.cancelled = True
            seq.cancel_reason = reason
            # Only a disconnect means nobody reads what is in flight; "stop", "stall", "error"
            # and "abort" are the server's own decisions.
            if reason == "disconnect" and seq.client_gone_at is None:
                seq.client_gone_at = now
            try:
                self._waiting.remove(seq)
            except ValueError:
                queued = False
            else:
                queued = True
                metrics.QUEUED_REQUESTS.set(len(self._waiting))
                self._generations.discard(gen)
                seq.finished = True
            self._cond.notify_all()
        if queued:
            gen._deliver(_End("cancelled"))
        elif self._wake_async is not None:
            self._wake_async.set()

    # ---- the decode loop (loop thread) ----------------------------------------------------

    def _run_thread(self) -> None:
        try:
            self.backend.enter_thread()
            while self._iterate(block=True):
                pass
        except BaseException as exc:  # the loop died: nothing can be served any more
            log.exception("decode loop died")
            self._die(f"the decode loop died: {exc!r}")
        else:
            self._die("the engine was closed")

    async def _run_blocking(self) -> None:
        """Failure mode `server-blocking-loop`: the loop runs on the event loop thread, and waits
        for due tokens with time.sleep, so the whole server freezes between tokens."""
        assert self._wake_async is not None
        try:
            while True:
                with self._cond:
                    idle = not self._active and not self._waiting and not self._stopping
                if idle:
                    self._wake_async.clear()
                    await self._wake_async.wait()
                    continue
                if not self._iterate(block=False, blocking_sleep=True):
                    break
                # Yield once per step so the tokens of this step get written out.
                await asyncio.sleep(0)
        except BaseException as exc:
            log.exception("decode loop died")
            self._die(f"the decode loop died: {exc!r}")
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            self._die("the engine was closed")

    def _iterate(self, block: bool, blocking_sleep: bool = False) -> bool:
        """One loop iteration: reap cancelled, admit, wait until something is due, step it.
        Returns False when the engine is stopping."""
        admitted: list[Sequence] = []
        with self._cond:
            if self._stopping:
                return False
            self._reap_cancelled()
            while self._waiting and self._slots_in_use < self.slots:
                seq = self._waiting.popleft()
                self._slots_in_use += 1
                admitted.append(seq)
            metrics.QUEUED_REQUESTS.set(len(self._waiting))
            metrics.SLOTS_IN_USE.set(self._slots_in_use)
            self._flush_events()  # the ends of reaped sequences, before any wait
            if not admitted and not self._active:
                if block:
                    self._cond.wait()
                return True
            if not admitted:
                delay = self._due_heap[0][0] - time.monotonic() if self._due_heap else 0.0
                if delay > BATCH_TOLERANCE_S:
                    if block:
                        self._cond.wait(timeout=delay)
                        return True
                    if blocking_sleep:
                        self._cond.release()
                        try:
                            time.sleep(delay)
                        finally:
                            self._cond.acquire()
                        return True
        for seq in admitted:
            self._admit(seq)
        self._flush_events()
        self._step_due()
        self._flush_events()
        return True

    def _reap_cancelled(self) -> None:
        """Free the slots of cancelled sequences (caller holds _cond)."""
        if not any(s.cancelled for s in self._active):
            return
        for seq in [s for s in self._active if s.cancelled]:
            self._finish(seq, "cancelled")

    def _admit(self, seq: Sequence) -> None:
        now = time.monotonic()
        seq.started_at = now
        seq.due = now + seq.request.pacing.first_token_delay_s
        self._active.append(seq)
        if seq.request.max_new_tokens == 0 or seq.request.forced_ids == []:
            self._finish(seq, "length" if seq.request.max_new_tokens == 0 else "stop")
            return
        try:
            self.backend.prefill(seq)
        except Exception as exc:
            log.exception("prefill failed")
            self._finish(seq, "error", f"prefill failed: {exc}")
            return
        if seq.max_new_tokens <= 0:  # the prompt fills the model's context
            self._finish(seq, "length")
            return
        heapq.heappush(self._due_heap, (seq.due, seq.id, seq))

    def _step_due(self) -> None:
        horizon = time.monotonic() + BATCH_TOLERANCE_S
        batch: list[Sequence] = []
        while self._due_heap and self._due_heap[0][0] <= horizon:
            _, _, seq = heapq.heappop(self._due_heap)
            if seq.finished:
                continue
            if seq.cancelled:
                self._finish(seq, "cancelled")
                continue
            batch.append(seq)
        if not batch:
            return
        t0 = time.perf_counter()
        try:
            tokens = self.backend.step(batch)
        except Exception as exc:
            log.exception("decode step failed")
            for seq in batch:
                self._finish(seq, "error", f"decode step failed: {exc}")
            return
        self.last_step_s = time.perf_counter() - t0
        self.step_times.append((len(batch), self.last_step_s))
        self.steps += 1
        metrics.TOKENS_GENERATED.inc(len(batch))
        now = time.monotonic()
        for seq, token in zip(batch, tokens):
            self._emit(seq, token, now)

    def _emit(self, seq: Sequence, token: int, now: float) -> None:
        req = seq.request
        if seq.client_gone_at is not None:
            metrics.TOKENS_AFTER_DISCONNECT.inc()
        if seq.cancelled:
            self._finish(seq, "cancelled")
            return
        if req.forced_ids is None and token in req.eos_token_ids:
            self._finish(seq, "stop")
            return
        index = seq.generated
        seq.generated += 1
        self._pending.append((seq.generation, TokenEvent(token_id=token, index=index)))
        if req.forced_ids is not None and seq.generated >= len(req.forced_ids):
            self._finish(seq, "stop")
        elif seq.generated >= seq.max_new_tokens:
            self._finish(seq, "length")
        else:
            seq.due = self._next_due(seq, now)
            heapq.heappush(self._due_heap, (seq.due, seq.id, seq))

    @staticmethod
    def _next_due(seq: Sequence, now: float) -> float:
        pacing = seq.request.pacing
        period = 1.0 / pacing.tokens_per_s if pacing.tokens_per_s else 0.0
        # Anchored to the schedule (no drift from step time), but never more than one period
        # behind now: an engine that fell behind resumes the rate instead of bursting.
        due = max(seq.due + period, now - period) if period else now
        if pacing.pause_after_tokens is not None and seq.generated == pacing.pause_after_tokens:
            due = max(due, now) + pacing.pause_s
        return due

    def _finish(self, seq: Sequence, reason: FinishReason, error: str | None = None) -> None:
        if seq.finished:
            return
        seq.finished = True
        try:
            self.backend.release(seq)
        except Exception:  # freeing must never take the loop down
            log.exception("release failed")
        try:
            self._active.remove(seq)
        except ValueError:
            pass
        else:
            self._slots_in_use -= 1
            metrics.SLOTS_IN_USE.set(self._slots_in_use)
        if seq.client_gone_at is not None:
            metrics.SLOT_HELD_AFTER_DISCONNECT.observe(time.monotonic() - seq.client_gone_at)
        with self._cond:
            self._generations.discard(seq.generation)
        self._pending.append((seq.generation, _End(reason, error)))

    def _flush_events(self) -> None:
        if not self._pending:
            return
        events, self._pending = self._pending, []
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(_deliver_all, events)
        except RuntimeError:  # the event loop has been closed under us
            pass

    def _die(self, message: str) -> None:
        """End every generation in flight with EngineStopped (loop thread, at exit)."""
        with self._cond:
            self._stopping = True
            gens = list(self._generations)
            self._generations.clear()
            self._waiting.clear()
        for seq in list(self._active):
            try:
                self.backend.release(seq)
            except Exception:
                pass
        self._active.clear()
        self._due_heap.clear()
        self._slots_in_use = 0
        self._running = False
        metrics.SLOTS_IN_USE.set(0)
        metrics.QUEUED_REQUESTS.set(0)
        self._pending.extend((g, _Stopped(message)) for g in gens)
        self._flush_events()


def _deliver_all(events: list[tuple[ScheduledGeneration, Any]]) -> None:
    for gen, item in events:
        gen._deliver(item)
