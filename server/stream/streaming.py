"""One completion, from engine token ids to the client: the token loop both replies share.

    engine tokens -> detokenizer -> stop handling -> frames (server/stream/sse.py) -> ASGI send

The two replies subclass `Completion`: the stream (SSECompletion, server/stream/sse_writer.py) and the
non-streaming reply (JSONCompletion, server/stream/json_reply.py). They are Starlette `Response`
subclasses that talk ASGI directly, because a stream needs what StreamingResponse hides: the
client's departure as soon as it happens (~ms after the FIN, even while the stream is silent),
writes from more than one place (heartbeats), write coalescing, and an abrupt close on purpose.

One task per stream, the request's own (a burst of 1,000 arrivals paid ~50 us per request for a
watcher, a ticker and a pump task each; docs/performance.md). Around the token loop (`_pump`):
* the departure: the connection calls back when it is lost (server/stream/extensions.py), or,
  under another ASGI server or a layer that watches `receive()`, a watcher task waiting for
  `http.disconnect`. Either cancels the generation (the engine frees the slot within one decode
  step and counts what it produced after the client had gone) and interrupts the pump; with
  `disconnect="ignore"` (failure mode) the stream carries on to the end for nobody;
* a timer: `: ping` after `heartbeat_s` of silence (before the first token, in pauses, while
  queued for a slot), and the stall timeout (no token for `stall_timeout_s`: in-band timeout error);
* tokens the engine hands over while the pump waits are written at once from the hand-over
  (`_take`), without waking the task, when nothing but the write is to be done; the rest (a
  role frame still to come, lab faults, a client not reading, coalescing) goes through the pump;
* a writer task, only when coalescing: frames made within `coalesce_ms` leave in one write
  (the SSE writer's);
* a send watchdog: a write blocked for `send_timeout_s` on a client that does not read aborts
  the connection (the slot is freed, `reason="stalled-client"`); without it a stalled reader
  held a slot, and the transport's buffer, for as long as it stayed connected.

Every stream that ends early is counted once in streamlab_requests_aborted_total, by reason.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Iterator

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from server import errors, metrics
from server.engine.base import EngineStopped
from server.stream.completion_job import AbortOnPurpose, CompletionJob, CompletionText, Fault
from server.stream.extensions import (ABORT_EXTENSION, BODY_SEND_EXTENSION, DEPARTURE_EXTENSION,
                                      GATHER_EXTENSION, WRITE_NOW_EXTENSION)

log = logging.getLogger("server.streaming")


@contextlib.contextmanager
def _no_gathering() -> Iterator[None]:
    """Where the server offers no `gather()` (another ASGI server, a test): writes leave as made."""
    yield


async def _after_the_end(message: Any) -> None:
    raise RuntimeError("this response has ended: nothing more can be sent")


class Completion(Response):
    """The token loop shared by both replies; subclasses decide what a piece of text becomes."""

    def __init__(self, job: CompletionJob) -> None:
        self.job = job
        self.status_code = 200
        self.background = None
        self.raw_headers = []
        self.client_gone = False
        self.tokens = 0
        self.last_token_at = time.monotonic()
        self._stalled = False
        self._task: asyncio.Task[Any] | None = None  # the request's task, which runs the pump
        self._pumping = False
        self._interrupted = False  # _interrupt cancelled the task; not yet taken back
        self._stop_taken = False  # _take met a stop sequence
        self._ticker: asyncio.TimerHandle | None = None
        self._beat: asyncio.Future[Any] | None = None  # a heartbeat being written
        self._counted: str | None = None  # the abort reason counted for this request
        self._client_stalled = False  # the send watchdog aborted the connection
        self._sending_since: float | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._abort_connection: Any = None

    # -- the ASGI entry point --------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extensions = scope.get("extensions") or {}
        self._abort_connection = extensions.get(ABORT_EXTENSION)
        self._asgi_send = send  # through `send`, which times each write for the watchdog
        # Body writes of the hot path (SSECompletion._emit) time themselves for the watchdog.
        self.body_send: Send = extensions.get(BODY_SEND_EXTENSION) or send
        self.gather = extensions.get(GATHER_EXTENSION) or _no_gathering
        self.write_now = extensions.get(WRITE_NOW_EXTENSION)
        self._task = asyncio.current_task()
        watcher: asyncio.Future[Any] | None = None
        outcome = "unfinished"
        try:
            self._arm_watchdog()
            await self.begin()
            # The departure is heard until the end is written (a coalesced tail can take a
            # window): from the connection itself where the server offers it, else by a task
            # waiting on `receive()` for http.disconnect.
            on_departure = extensions.get(DEPARTURE_EXTENSION)
            if on_departure is not None:
                on_departure(self._client_left)
            else:
                watcher = asyncio.ensure_future(self._watch_disconnect(receive))
            if self.job.settings.stall_timeout_s or self.heartbeat_s:
                self._arm_ticker()
            take_with = getattr(self.job.generation, "take_with", None)
            if take_with is not None and self.write_now is not None:
                take_with(self._take)
            self._pumping = True
            try:
                outcome = await self._pump()
            except asyncio.CancelledError:
                if not self._interrupted:
                    # Cancelled from outside: the server is shutting down under us.
                    self.job.generation.cancel("shutdown")
                    outcome = "shutdown"
                    raise
                # Our own interruption, past the pump's handler (writing its last frames).
                self._uncancel()
                outcome = "gone" if self.client_gone else "unfinished"
            finally:
                self._pumping = False
                if take_with is not None:
                    take_with(None)
                self._stop_ticker()
            await self.end(outcome)
        except Exception:
            # A bug after the first byte: one stream ends, counted and logged; the connection
            # is cut, since the response cannot be completed.
            log.exception("%s: the stream failed", self.job.completion_id)
            self.job.generation.cancel("error")
            self._count("error")
            self._abort()
            outcome = "failed"
        finally:
            if watcher is not None:
                watcher.cancel()
            self._stop_ticker()
            if self._watchdog is not None:
                self._watchdog.cancel()
            if outcome == "gone" or (outcome == "complete" and self.client_gone):
                self._count("stalled-client" if self._client_stalled else "disconnect")
            # A layer around this reply (server/http/records.py) sends through closures that refer
            # to it: let go of them, or the reply and everything it holds is a reference cycle.
            self._asgi_send = self.body_send = _after_the_end

    def _take(self, token_id: int) -> bool | None:
        """A token handed over while the pump waits for one (generation.deliver, on the event
        loop): written at once, as `_pump` would, when nothing but the write is to be done;
        False leaves it to the pump (a role frame still to come, lab faults, a client gone or
        not reading, a coalescing writer). A stop match cancels the generation: its end ends the pump, and
        tokens still in flight are dropped, as the pump's `break` leaves them unread."""
        if self._stop_taken:
            return None
        if not self._pumping or self.client_gone or self._interrupted or not self._can_write_now():
            return False
        job = self.job
        count = self.tokens + 1
        if count == job.abort_after_tokens or count == job.error_after_tokens:
            return False
        self.tokens = count
        self.last_token_at = time.monotonic()
        text = job.text
        piece = text.push(token_id)
        if piece:
            self.content_now(piece)
        if text.stopped:
            self._stop_taken = True
            job.generation.cancel("stop")
        return True

    def _can_write_now(self) -> bool:
        return False  # the stream's writer decides (server/stream/sse_writer.py)

    def content_now(self, text: str) -> None:
        raise NotImplementedError

    def _interrupt(self) -> None:
        """End the token loop now (the client left, or the stream stalled): the pump runs in
        this request's own task, so that task is cancelled, once, while it pumps."""
        if self._pumping and not self._interrupted and self._task is not None:
            self._interrupted = True
            self._task.cancel()

    def _uncancel(self) -> None:
        """Take back the cancellation `_interrupt` asked for (the task goes on to end the reply)."""
        if self._interrupted:
            self._interrupted = False
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()

    def _count(self, reason: str) -> None:
        """Count this request's early end once (the first reason found is the one)."""
        if self._counted is None:
            self._counted = reason
            metrics.REQUESTS_ABORTED.labels(reason=reason).inc()

    # -- the send watchdog ----------------------------------------------------------------------

    async def send(self, message: Any) -> None:
        # A method, not a closure kept on `self`: a stream that refers to itself is a reference
        # cycle, and all it holds waits for the cyclic collector (tests/server/test_no_cycles.py).
        self._sending_since = time.monotonic()
        try:
            await self._asgi_send(message)
        finally:
            self._sending_since = None

    def _arm_watchdog(self) -> None:
        timeout = self.job.send_timeout_s
        if timeout:
            # Checked a few times per timeout: a blocked write is noticed within 1.25 x of it.
            self._watchdog = asyncio.get_running_loop().call_later(timeout / 4, self._check_send)

    def _check_send(self) -> None:
        since = self._sending_since
        timeout = self.job.send_timeout_s or 0.0
        if since is not None and time.monotonic() - since >= timeout and not self.client_gone:
            log.info("%s: a write blocked for %g s on a client that does not read: aborting the "
                     "stream after %d tokens", self.job.completion_id, timeout, self.tokens)
            self._client_stalled = True
            self.job.generation.cancel("stalled-client")
            self._abort()
            return
        self._arm_watchdog()

    def _abort(self) -> None:
        """Cut the connection without flushing (a reader that stopped would never drain it);
        uvicorn then unblocks the write and the disconnect watcher ends the stream."""
        if self._abort_connection is not None:
            self._abort_connection()
        else:  # not under server/http/connections.py: end the stream; the slot is freed
            self.client_gone = True
            self._interrupt()

    async def _watch_disconnect(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._client_left()

    def _client_left(self) -> None:
        """The client has gone (the connection told us, or `receive()` did)."""
        if self.client_gone:
            return
        self.client_gone = True
        self.left()
        generation = self.job.generation
        if self.job.settings.disconnect == "abort":
            # The engine frees the slot within one decode step and counts the token in flight
            # (tokens_after_disconnect); the stream ends now, without waiting for the engine.
            generation.cancel("disconnect")
            self._interrupt()
        else:  # failure mode: nobody notices; the engine still counts what it makes for nobody
            mark = getattr(generation, "mark_client_gone", None)
            if mark is not None:
                mark()

    def _arm_ticker(self) -> None:
        """A timer for the next heartbeat or stall check (no task: most streams never need one)."""
        due = [self.last_emit_at + self.heartbeat_s] if self.heartbeat_s else []
        stall_s = self.job.settings.stall_timeout_s
        if stall_s:
            due.append(self.last_token_at + stall_s)
        self._ticker = asyncio.get_running_loop().call_later(
            max(0.001, min(due) - time.monotonic()), self._on_tick)

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._beat is not None:
            self._beat.cancel()
            self._beat = None

    def _on_tick(self) -> None:
        """Heartbeat after silence, and the stall timeout; else the timer moves to the next due."""
        self._ticker = None
        if not self._pumping:
            return
        now = time.monotonic()
        stall_s = self.job.settings.stall_timeout_s
        if stall_s and now - self.last_token_at >= stall_s:
            self._stalled = True
            self._interrupt()
            return
        if self.heartbeat_s and now - self.last_emit_at >= self.heartbeat_s and not self.client_gone:
            self._beat = asyncio.ensure_future(self._beat_then_rearm())
            return
        self._arm_ticker()

    async def _beat_then_rearm(self) -> None:
        await self.heartbeat()
        self._beat = None
        if self._pumping:
            self._arm_ticker()

    # -- the token loop --------------------------------------------------------------------

    async def _pump(self) -> str:
        """Run the generation to its end; returns "complete", "abort" or "gone"."""
        job = self.job
        generation, text = job.generation, job.text
        finish = "stop"
        try:
            self._check_lab_faults()
            async for event in generation:
                if self.client_gone:
                    continue  # the one in flight (abort), or everything (disconnect="ignore")
                self.tokens += 1
                self.last_token_at = time.monotonic()
                piece = text.push(event.token_id)
                if piece:
                    await self.content(piece)
                if text.stopped:
                    generation.cancel("stop")
                    break
                self._check_lab_faults()
            else:
                if generation.finish_reason == "error":
                    raise Fault("error", getattr(generation, "error", None) or "generation failed",
                                 errors.SERVER_ERROR, "generation_failed")
                finish = "length" if generation.finish_reason == "length" else "stop"
                if not self.client_gone:
                    tail = text.finish()
                    if tail:
                        await self.content(tail)
                    if text.stopped:
                        finish = "stop"
            if self.client_gone:
                return "gone"  # counted by __call__
            await self.complete(finish)
            return "complete"
        except EngineStopped as exc:
            return await self._fail(Fault("error", f"the engine stopped: {exc}",
                                           errors.SERVER_ERROR, "engine_stopped"))
        except Fault as fault:
            generation.cancel(fault.reason)
            return await self._fail(fault)
        except AbortOnPurpose:
            generation.cancel("abort")
            self._count("abort")
            await self.flush()
            log.info("%s: aborting the connection on purpose after %d tokens (lab)",
                     job.completion_id, self.tokens)
            return "abort"
        except asyncio.CancelledError:
            if not self._interrupted:
                raise
            self._uncancel()
            if self.client_gone:
                return "gone"  # counted by __call__
            generation.cancel("stall")
            stall_s = job.settings.stall_timeout_s
            return await self._fail(Fault("stall", f"no token for {stall_s:g} s: the stream stalled",
                                           errors.TIMEOUT, "stream_stalled"))

    def _check_lab_faults(self) -> None:
        if self.tokens == self.job.abort_after_tokens:
            raise AbortOnPurpose()
        if self.tokens == self.job.error_after_tokens:
            raise Fault("error", f"injected error after {self.tokens} tokens (lab.error_after_tokens)",
                         errors.SERVER_ERROR, "injected_error")

    async def _fail(self, fault: Fault) -> str:
        self._count(fault.reason)
        if self.client_gone:
            return "gone"
        return await self.failed(fault)

    # -- what subclasses provide -------------------------------------------------------------

    heartbeat_s: float | None = None
    last_emit_at: float = 0.0

    def left(self) -> None:
        """The client has gone (called once, on the event loop)."""

    async def begin(self) -> None: ...
    async def heartbeat(self) -> None: ...
    async def content(self, text: str) -> None: ...
    async def complete(self, finish_reason: str) -> None: ...
    async def failed(self, fault: Fault) -> str: ...
    async def flush(self) -> None: ...
    async def end(self, outcome: str) -> None: ...
