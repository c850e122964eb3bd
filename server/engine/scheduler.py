"""Pacing, batching and cancellation: the decode loop both engines share.

An engine is this scheduler plus a Backend that knows how to prefill a sequence and how to compute
the next token for a batch of sequences (a model forward pass, or a table look-up for the
synthetic engine). The scheduler decides *when* and *which*:

* Slots: at most `slots` sequences hold a slot; the rest wait in a bounded FIFO queue, and a
  submit beyond both is refused at once (server/engine/admission.py).
* Pacing lives in the loop: each sequence has a due time for its next token, and a token is
  computed only when it is due. Nothing is computed ahead, so a client that stops reading never
  makes the engine run ahead, and a cancel finds at most one token in flight.
* Batching: every iteration steps all sequences that are due (within a small tolerance) in one
  Backend.step call, so unpaced sequences share every forward pass.
* Threading: the loop runs on its own thread (never the event loop), except in the
  `blocking_loop` failure mode. Tokens reach asyncio through one `call_soon_threadsafe` per loop
  iteration (a batch of events), into a token buffer per generation
  (server/engine/generation.py).
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
from typing import Any

from server import metrics
from server.engine.admission import Admission
from server.engine.backend import Backend, SequenceFailed
from server.engine.generation import Sequence
from server.engine.base import Engine, EngineStopped, FinishReason, Generation, GenerationRequest, TokenEvent
from server.engine.generation import End, ScheduledGeneration, Stopped, deliver_all

log = logging.getLogger(__name__)

# Sequences due within this much of now are stepped together with the ones already due: a token
# up to 1 ms early is invisible at any lab rate, and it lets paced streams share forward passes.
BATCH_TOLERANCE_S = 0.001
# The longest single wait of the loop; longer silences are several waits.
MAX_WAIT_PIECE_S = 60.0


class Scheduler(Engine):
    """The Engine implementation: a Backend driven by a paced, batched decode loop."""

    def __init__(self, name: str, backend: Backend, slots: int, max_queue: int,
                 blocking_loop: bool = False, serial_prefill: bool = False) -> None:
        self.admission = Admission(slots, max_queue)
        self.name = name
        self.slots = slots
        self.max_queue = max_queue
        self.backend = backend
        self.blocking_loop = blocking_loop
        self.serial_prefill = serial_prefill
        self._cond = self.admission.cond  # also guards _stopping
        # The sequences holding slots, as an ordered set (a dict: O(1) removal when one of 1,000
        # ends; a list's remove() made a burst's ends quadratic). Loop thread only.
        self._active: dict[Sequence, None] = {}
        # Sequences cancelled while holding a slot, for the next iteration to free (guarded by
        # _cond): the loop no longer scans every active sequence on every iteration for them.
        self._cancelled: list[Sequence] = []
        self._wake_scheduled = False  # event loop thread only (see _wake_soon)
        self._due_heap: list[tuple[float, int, Sequence]] = []  # loop thread only
        self._ids = itertools.count()
        self._stopping = False
        self._running = False
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake_async: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[ScheduledGeneration, Any]] = []  # events of this iteration
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
        self.admission.enqueue(seq, wake=False)
        self._wake_soon()
        return gen

    def _wake_soon(self) -> None:
        """Wake the decode loop once per event-loop iteration, however many requests were
        submitted in it (event loop thread). Woken on every submit, the loop ran an iteration of
        its own per request in a burst of 1,000: a GIL hand-off, an admission and a token step of
        one sequence each time, and one event batch back per request."""
        if self._wake_async is not None:
            self._wake_async.set()
            return
        if self._wake_scheduled or self._loop is None:
            return
        self._wake_scheduled = True
        self._loop.call_soon(self._wake_decode_loop)

    def _wake_decode_loop(self) -> None:
        self._wake_scheduled = False
        with self._cond:
            self._cond.notify_all()

    @property
    def healthy(self) -> bool:
        return self._running and not self._stopping

    @property
    def slots_in_use(self) -> int:
        return self.admission.in_use

    @property
    def queued(self) -> int:
        return self.admission.queued

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "slots": self.slots, "max_queue": self.max_queue,
                **self.backend.describe()}

    def cancel(self, gen: ScheduledGeneration, reason: str) -> None:
        """End `gen` (its own cancel() lands here): at once while queued, else within one step."""
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
            queued = self.admission.withdraw(seq)
            if queued:
                seq.finished = True
            else:
                self._cancelled.append(seq)
            self._cond.notify_all()
        if queued:
            gen.deliver(End("cancelled"))
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
                    idle = not self._active and not self.admission.queued and not self._stopping
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
        with self._cond:
            if self._stopping:
                return False
            self._reap_cancelled()
            admitted = self.admission.admit()
            self._flush_events()  # the ends of reaped sequences, before any wait
            if not admitted and not self._active:
                if block:
                    self._cond.wait()
                return True
            if not admitted:
                delay = self._due_heap[0][0] - time.monotonic() if self._due_heap else 0.0
                if delay > BATCH_TOLERANCE_S:
                    # Waits are cut into bounded pieces (the loop re-checks after each): a wait
                    # past threading.TIMEOUT_MAX raises OverflowError and used to kill the loop.
                    delay = min(delay, MAX_WAIT_PIECE_S)
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
        if admitted:
            self._admit_all(admitted)
        self._flush_events()
        self._step_due()
        self._flush_events()
        return True

    def _reap_cancelled(self) -> None:
        """Free the slots of cancelled sequences (caller holds _cond)."""
        if not self._cancelled:
            return
        cancelled, self._cancelled = self._cancelled, []
        for seq in cancelled:
            if seq in self._active:
                self._finish(seq, "cancelled")

    def _admit_all(self, admitted: list[Sequence]) -> None:
        """Give the admitted sequences their slots and prefill them together (one forward pass
        on the transformers engine: a burst of arrivals no longer prefills one by one)."""
        now = time.monotonic()
        to_prefill: list[Sequence] = []
        for seq in admitted:
            seq.started_at = now
            seq.due = now + seq.request.pacing.first_token_delay_s
            self._active[seq] = None
            if seq.request.max_new_tokens == 0 or seq.request.forced_ids == []:
                self._finish(seq, "length" if seq.request.max_new_tokens == 0 else "stop")
            else:
                to_prefill.append(seq)
        if not to_prefill:
            return
        try:
            if self.serial_prefill:  # one pass per request, as before batching
                failures = [self.backend.prefill_many([seq])[0] for seq in to_prefill]
            else:
                failures = self.backend.prefill_many(to_prefill)
        except Exception as exc:  # the batched pass itself failed: every one of them ends
            failures = [exc] * len(to_prefill)
        for seq, failure in zip(to_prefill, failures):
            if failure is not None:
                log.error("prefill failed: %r", failure)
                self._finish(seq, "error", f"prefill failed: {failure}")
            elif seq.max_new_tokens <= 0:  # the prompt fills the model's context
                self._finish(seq, "length")
            else:
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
            if isinstance(token, SequenceFailed):
                # One sequence's failure (its sampling) ends that sequence alone.
                log.warning("sequence %d failed: %s", seq.id, token)
                self._finish(seq, "error", f"generation failed: {token}")
                continue
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
            seq.due = seq.next_due(now)
            heapq.heappush(self._due_heap, (seq.due, seq.id, seq))

    def _finish(self, seq: Sequence, reason: FinishReason, error: str | None = None) -> None:
        if seq.finished:
            return
        seq.finished = True
        try:
            self.backend.release(seq)
        except Exception:  # freeing must never take the loop down
            log.exception("release failed")
        if self._active.pop(seq, False) is None:  # it held a slot
            self.admission.free_slot()
        if seq.client_gone_at is not None:
            metrics.SLOT_HELD_AFTER_DISCONNECT.observe(time.monotonic() - seq.client_gone_at)
        self.admission.forget(seq.generation)
        self._pending.append((seq.generation, End(reason, error)))

    def _flush_events(self) -> None:
        if not self._pending:
            return
        events, self._pending = self._pending, []
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(deliver_all, events)
        except RuntimeError:  # the event loop has been closed under us
            pass

    def _die(self, message: str) -> None:
        """End every generation in flight with EngineStopped (loop thread, at exit)."""
        with self._cond:
            self._stopping = True
            gens = self.admission.drain()
        for seq in list(self._active):
            try:
                self.backend.release(seq)
            except Exception:
                pass
        self._active.clear()
        self._cancelled.clear()
        self._due_heap.clear()
        self._running = False
        self._pending.extend((g, Stopped(message)) for g in gens)
        self._flush_events()

