"""`stream: true`: the SSE writer. Frames (server/sse.py) leave as they are made, or, with
`coalesce_ms`, all frames made within one window leave in one write."""
from __future__ import annotations

import asyncio
import logging
import time

from starlette.types import Receive, Scope, Send

from server import metrics, sse
from server.streaming import Completion, CompletionJob, Fault

log = logging.getLogger("server.streaming")

# Per-stream counters reach Prometheus in batches: a labelled counter's inc() takes a lock, and
# a write costs only a few microseconds.
_METRIC_BATCH_WRITES = 64


class SSECompletion(Completion):
    """`stream: true`: SSE frames as OpenAI sends them, written as they are made."""

    def __init__(self, job: CompletionJob) -> None:
        super().__init__(job)
        settings = job.settings
        self.raw_headers = sse.streaming_headers(settings.omit_headers)
        self.heartbeat_s = settings.heartbeat_s
        self.framer = sse.ChunkFramer(job.completion_id, job.created, job.model,
                                      job.system_fingerprint, job.include_usage, job.stamp)
        self._stamp = job.stamp
        self._coalesce_s = settings.coalesce_ms / 1000.0
        self._pending: list[bytes] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self._first_content = True
        self._writes = self._frames = self._pings = 0
        self.last_emit_at = time.monotonic()

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
        await self.send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        metrics.REQUESTS.labels(status="200").inc()
        if self._coalesce_s > 0:
            self._writer = asyncio.ensure_future(self._write_loop())
        await self._emit(self.framer.role())

    async def heartbeat(self) -> None:
        self._pings += 1
        await self._emit(sse.PING)

    async def content(self, text: str) -> None:
        if self._first_content:
            self._first_content = False
            metrics.TIME_TO_FIRST_TOKEN.observe(time.monotonic() - self.job.arrived_at)
        await self._emit(self.framer.content(text))

    async def complete(self, finish_reason: str) -> None:
        await self._emit(self.framer.finish(finish_reason))
        if self.job.include_usage:
            generation = self.job.generation
            await self._emit(self.framer.usage(generation.prompt_tokens, generation.completion_tokens))
        await self._emit(sse.DONE)

    async def failed(self, fault: Fault) -> str:
        mode = self.job.settings.error_mode
        if mode == "inband":
            metrics.INBAND_ERRORS.inc()
            await self._emit(self.framer.error(fault.error))
            await self._emit(sse.DONE)
        elif mode == "fake-done":  # failure mode: an ending indistinguishable from success
            await self.complete("stop")
        # "silent-close" (failure mode): the body just ends, without an error or [DONE].
        log.info("%s: %s after %d tokens (error mode %s)", self.job.completion_id,
                 fault.error["message"], self.tokens, mode)
        return "complete"

    async def _emit(self, frame: bytes) -> None:
        if self.client_gone:
            return
        self.last_emit_at = time.monotonic()
        if self._writer is None:
            await self._write([frame])
        else:
            self._pending.append(frame)
            self._wake.set()

    async def _write(self, frames: list[bytes], more_body: bool = True) -> None:
        if self._stamp:
            body = sse.seal(frames, sse.now_stamp())
        else:
            body = frames[0] if len(frames) == 1 else b"".join(frames)
        self._writes += 1
        self._frames += len(frames)
        if self._writes % _METRIC_BATCH_WRITES == 0:
            self._publish_counts()
        await self.send({"type": "http.response.body", "body": body, "more_body": more_body})

    async def _write_loop(self) -> None:
        """Coalescing: the first frame opens a window; all frames made within it leave together."""
        while True:
            await self._wake.wait()
            if not self._closing:
                await asyncio.sleep(self._coalesce_s)
            frames, self._pending = self._pending, []
            self._wake.clear()
            if frames and not self.client_gone:
                await self._write(frames)
            if self._closing:
                return

    def left(self) -> None:
        # Nobody reads what is pending: do not sit out the coalescing window for it.
        if self._writer is not None:
            self._writer.cancel()

    async def flush(self) -> None:
        writer = self._writer
        if writer is None:
            return
        if not self.client_gone:
            self._closing = True
            self._wake.set()
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
            if outcome == "complete" and not self.client_gone:
                # The terminating zero-length chunk. Not sent on "abort": uvicorn then closes the
                # connection mid-body, which the client sees as a crash (incomplete chunked read).
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._publish_counts()
