"""`stream: true`: the SSE writer. Frames (the job's protocol's framer: server/stream/sse.py for chat,
server/apis/ for the others) leave as they are made, or, with `coalesce_ms`, all frames made within
one window leave in one write.

With `event_ids`, every data frame carries `id: N` (N counts the stream's data frames), so an
EventSource that loses the connection reconnects with `Last-Event-ID: N`; the answer is
regenerated (the lab's answers are deterministic: a script, or a seed) and only the frames after
N are sent. A server whose answers are sampled would keep each response's frames instead.
A resumed stream is not dropped again by `abort_after_tokens`: that fault stands for one failure
of the network, and only with ids can the server tell a reconnection from a new request.
The Responses API's resume (`GET /v1/responses/{id}?stream=true&starting_after=N`) is the same
regeneration: `skip_events` drops the events the client has (server/apis/responses.py).

`error_mode="hold-open"` (failure mode): the protocol's failure event, then nothing, the socket
left open until the client leaves (no heartbeat either): a client that waits for the close, or
for `[DONE]` on a protocol without it, waits for its own idle timeout (openai/codex#43140).

`split_utf8_ms` (failure mode of a hop that re-chunks): a frame holding a multi-byte character
leaves in two writes that far apart, the first ending inside the character.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from starlette.types import Receive, Scope, Send

from server import metrics
from server.stream import sse
from server.stream.sse import OpenFrame
from server.stream.streaming import Completion, CompletionJob, Fault

log = logging.getLogger("server.streaming")

# Per-stream counters reach Prometheus in batches: a labelled counter's inc() takes a lock, and
# a write costs only a few microseconds.
_METRIC_BATCH_WRITES = 64
_requests_ok: Any = None  # streamlab_requests_total{status="200"}: labels() looked up once
# How an event of a stream begins (a comment, `: ping`, is no event): chat's `data:`, or the
# `event:` line of the protocols that name their events.
_EVENT_STARTS = (b"data:", b"event:")


def _count_ok() -> None:
    global _requests_ok
    if _requests_ok is None:
        _requests_ok = metrics.REQUESTS.labels(status="200")
    _requests_ok.inc()


class SSECompletion(Completion):
    """`stream: true`: SSE frames as OpenAI sends them, written as they are made."""

    def __init__(self, job: CompletionJob, last_event_id: str | None = None,
                 skip_events: int = 0) -> None:
        super().__init__(job)
        settings = job.settings
        self.raw_headers = sse.streaming_headers(settings.omit_headers, settings.no_transform)
        self.heartbeat_s = settings.heartbeat_s
        self.framer = job.wire.framer(job)
        self._stamp = job.stamp
        self._coalesce_s = settings.coalesce_ms / 1000.0
        self._pending: list[bytes] = []
        self._wake: asyncio.Event | None = None  # the coalescing writer's (made in begin)
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self._first_content = True
        self._writes = self._frames = self._pings = 0
        self.last_emit_at = time.monotonic()
        self._event_ids = bool(settings.event_ids)
        self._data_frames = 0
        self._resume_after = max(resume_point(last_event_id) if self._event_ids else 0, skip_events)
        # Data frames are counted only where ids are written or some are skipped.
        self._counting = self._event_ids or self._resume_after > 0
        self._hold: asyncio.Future[None] | None = None  # error_mode hold-open: until the client leaves
        if self._resume_after:
            job.abort_after_tokens = None
        self._split_s = (settings.split_utf8_ms or 0.0) / 1000.0
        self._role_pending = settings.role_chunk == "with-first-token"
        self._body_ended = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Up and down around everything, whichever way the stream ends (the gauge once leaked).
        metrics.ACTIVE_STREAMS.inc()
        try:
            await super().__call__(scope, receive, send)
        finally:
            metrics.ACTIVE_STREAMS.dec()
            if self._writer is not None:
                self._writer.cancel()

    async def begin(self) -> None:
        with self.gather():  # the headers and the first frames in one write
            await self.send({"type": "http.response.start", "status": 200,
                             "headers": self.raw_headers})
            _count_ok()
            if self._coalesce_s > 0:
                self._wake = asyncio.Event()
                self._writer = asyncio.ensure_future(self._write_loop())
            if self.job.settings.hello:
                await self._emit(sse.HELLO)
            if self._role_pending:
                return  # vLLM-style: the role chunk waits for the first token (or the end)
            for frame in self.framer.opening():
                await self._emit(frame)

    async def _role_first(self) -> None:
        if self._role_pending:
            self._role_pending = False
            for frame in self.framer.opening():
                await self._emit(frame)

    async def heartbeat(self) -> None:
        self._pings += 1
        await self._emit(self.framer.heartbeat)

    async def content(self, text: str) -> None:
        if self._first_content:
            self._first_content = False
            metrics.TIME_TO_FIRST_TOKEN.observe(time.monotonic() - self.job.arrived_at)
            await self._role_first()
        await self._emit(self.framer.content(text))

    async def complete(self, finish_reason: str) -> None:
        # The last frames and the body's end are made in the same instant: one write.
        with self.gather():
            await self._role_first()
            generation = self.job.generation
            for frame in self.framer.closing(finish_reason, generation.prompt_tokens,
                                             generation.completion_tokens):
                await self._emit(frame)
            if self._writer is None and not self.client_gone:  # coalesced: end() ends it
                await self._end_body()

    async def _end_body(self) -> None:
        # The terminating zero-length chunk. Not sent on "abort": uvicorn then closes the
        # connection mid-body, which the client sees as a crash (incomplete chunked read).
        self._body_ended = True
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def failed(self, fault: Fault) -> str:
        mode = self.job.settings.error_mode
        await self._role_first()
        if mode == "inband" or mode == "hold-open":
            metrics.INBAND_ERRORS.inc()
            for frame in self.framer.failure(fault):
                await self._emit(frame)
            if mode == "inband":
                for frame in self.framer.failure_end:
                    await self._emit(frame)
        elif mode == "fake-done":  # failure mode: an ending indistinguishable from success
            await self.complete("stop")
        # "silent-close" (failure mode): the body just ends, without an error or [DONE].
        log.info("%s: %s after %d tokens (error mode %s)", self.job.completion_id,
                 fault.error["message"], self.tokens, mode)
        if mode == "hold-open":
            await self._hold_open()
            return "gone"
        return "complete"

    async def _hold_open(self) -> None:
        """Written, then silent until the client leaves: its departure interrupts this wait
        (or, with `disconnect="ignore"`, `left()` ends it)."""
        await self.flush()
        self._stop_ticker()  # no heartbeat: the silence is the failure mode
        if not self.client_gone:
            self._hold = asyncio.get_running_loop().create_future()
            await self._hold

    def _can_write_now(self) -> bool:
        # A token written from the engine's hand-over: only in the plain case (one write per
        # frame, no role frame waiting for it, the cycle ready for a write without waiting).
        return (not self._role_pending and self._writer is None and not self._split_s
                and self.write_now.ready())  # type: ignore[union-attr]

    def content_now(self, text: str) -> None:
        """`content` without an await (after `_can_write_now`): the frame leaves at once."""
        if self._first_content:
            self._first_content = False
            metrics.TIME_TO_FIRST_TOKEN.observe(time.monotonic() - self.job.arrived_at)
        frame = self._with_id(self.framer.content(text))
        if frame is None:
            return
        self.last_emit_at = time.monotonic()
        if self._stamp and type(frame) is OpenFrame:
            frame = sse.seal((frame,), sse.now_stamp())
        self._count_write()
        self.write_now.write(frame)  # type: ignore[union-attr]

    def _with_id(self, frame: bytes) -> bytes | None:
        """With `event_ids`, a data frame's `id:` line; None for a frame the reconnecting client
        already has."""
        if self._counting and frame.startswith(_EVENT_STARTS):
            self._data_frames += 1
            if self._data_frames <= self._resume_after:
                return None
            if not self._event_ids:
                return frame
            line = b"id: %d\n" % self._data_frames
            return OpenFrame(line + frame) if type(frame) is OpenFrame else line + frame
        return frame

    def _count_write(self) -> None:
        self._writes += 1
        self._frames += 1
        if self._writes % _METRIC_BATCH_WRITES == 0:
            self._publish_counts()

    async def _emit(self, frame: bytes) -> None:
        """One frame out: written now (the hot path, one per token: no list, no await but the
        socket's), or handed to the coalescing writer."""
        if self.client_gone:
            return
        framed = self._with_id(frame)
        if framed is None:
            return  # the reconnecting client has this frame already
        frame = framed
        self.last_emit_at = now = time.monotonic()
        if self._writer is not None:
            self._pending.append(frame)
            self._wake.set()  # type: ignore[union-attr]
        elif self._split_s:
            await self._write([frame])
        else:
            if self._stamp and type(frame) is OpenFrame:
                frame = sse.seal((frame,), sse.now_stamp())  # its send time, as it leaves
            self._count_write()
            self._sending_since = now  # for the send watchdog
            try:
                await self.body_send({"type": "http.response.body", "body": frame, "more_body": True})
            finally:
                self._sending_since = None

    async def _write(self, frames: list[bytes], more_body: bool = True) -> None:
        if self._stamp:
            body = sse.seal(frames, sse.now_stamp())
        else:
            body = frames[0] if len(frames) == 1 else b"".join(frames)
        self._writes += 1
        self._frames += len(frames)
        if self._writes % _METRIC_BATCH_WRITES == 0:
            self._publish_counts()
        cut = split_point(body) if self._split_s else None
        if cut is not None:
            await self.send({"type": "http.response.body", "body": body[:cut], "more_body": True})
            await asyncio.sleep(self._split_s)  # the failure mode: the rest of the character later
            body = body[cut:]
        await self.send({"type": "http.response.body", "body": body, "more_body": more_body})

    async def _write_loop(self) -> None:
        """Coalescing: the first frame opens a window; all frames made within it leave together."""
        wake = self._wake
        assert wake is not None
        while True:
            await wake.wait()
            if not self._closing:
                await asyncio.sleep(self._coalesce_s)
            frames, self._pending = self._pending, []
            wake.clear()
            if frames and not self.client_gone:
                await self._write(frames)
            if self._closing:
                return

    def left(self) -> None:
        # Nobody reads what is pending: do not sit out the coalescing window for it.
        if self._writer is not None:
            self._writer.cancel()
        if self._hold is not None and not self._hold.done():
            self._hold.set_result(None)

    async def flush(self) -> None:
        writer = self._writer
        if writer is None:
            return
        if not self.client_gone:
            self._closing = True
            self._wake.set()  # type: ignore[union-attr]
        # wait(), not await: the writer may be cancelled (left()) while this waits for it.
        await asyncio.wait({writer})
        self._writer = None
        if not writer.cancelled() and writer.exception() is not None:
            raise writer.exception()  # type: ignore[misc]

    def _publish_counts(self) -> None:
        metrics.STREAM_WRITES.inc(self._writes)
        metrics.SSE_FRAMES.inc(self._frames)
        metrics.HEARTBEATS.inc(self._pings)
        self._writes = self._frames = self._pings = 0

    async def end(self, outcome: str) -> None:
        try:
            await self.flush()
            if outcome == "complete" and not self.client_gone and not self._body_ended:
                await self._end_body()
        finally:
            self._publish_counts()


def resume_point(last_event_id: str | None) -> int:
    """The data frames a reconnecting client already has (0: none, or an id we did not send)."""
    text = (last_event_id or "").strip()
    return int(text) if text.isdigit() and len(text) < 10 else 0


def split_point(body: bytes) -> int | None:
    """Where to cut `body` so the first part ends inside its first multi-byte character."""
    for index, byte in enumerate(body):
        if byte >= 0xC0:  # a UTF-8 lead byte: cut after it
            return index + 1
    return None
