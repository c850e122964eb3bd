"""`stream: false`: the JSON reply, one object in the job's protocol (chat's `chat.completion`, a
Responses `response`, a Messages `message`) sent once generation is over."""
from __future__ import annotations

import json
import time

from server import metrics
from server.stream.streaming import Completion, CompletionJob, Fault


class JSONCompletion(Completion):
    """`stream: false`: one reply object once generation is over."""

    def __init__(self, job: CompletionJob) -> None:
        super().__init__(job)
        self._pieces: list[str] = []
        self._body: bytes = b""
        self._status = 200
        self.last_emit_at = time.monotonic()

    async def content(self, text: str) -> None:
        if not self._pieces:
            metrics.TIME_TO_FIRST_TOKEN.observe(time.monotonic() - self.job.arrived_at)
        self._pieces.append(text)

    async def complete(self, finish_reason: str) -> None:
        job = self.job
        self._body = json.dumps(job.wire.reply(job, "".join(self._pieces), finish_reason),
                                ensure_ascii=False, separators=(",", ":")).encode()

    async def failed(self, fault: Fault) -> str:
        # Nothing was sent yet, so the error is an ordinary status (504 for a stall, as a proxy
        # would) in the protocol's error shape.
        self._status, body = self.job.wire.failure_reply(self.job, fault)
        self._body = json.dumps(body).encode()
        return "complete"

    async def end(self, outcome: str) -> None:
        if outcome == "gone":
            return  # nobody to answer; uvicorn sees a disconnected client and sends nothing
        if outcome == "abort":
            await self.complete("length")
        metrics.REQUESTS.labels(status=str(self._status)).inc()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(self._body)).encode())]
        with self.gather():  # the headers and the body in one write
            await self.send({"type": "http.response.start", "status": self._status,
                             "headers": headers})
            if outcome == "abort":
                # A crash mid-body: half the announced length, then uvicorn closes the connection.
                await self.send({"type": "http.response.body",
                                 "body": self._body[:len(self._body) // 2], "more_body": True})
                return
            await self.send({"type": "http.response.body", "body": self._body, "more_body": False})
