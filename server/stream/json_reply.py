"""`stream: false`: the JSON reply, one `chat.completion` object sent once generation is over."""
from __future__ import annotations

import json
import time

from server import metrics
from server.stream import sse
from server.stream.streaming import Completion, CompletionJob, Fault


class JSONCompletion(Completion):
    """`stream: false`: one `chat.completion` object once generation is over."""

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
        job, generation = self.job, self.job.generation
        self._body = json.dumps(sse.completion_object(
            job.completion_id, job.created, job.model, job.system_fingerprint,
            "".join(self._pieces), finish_reason, generation.prompt_tokens,
            generation.completion_tokens), ensure_ascii=False, separators=(",", ":")).encode()

    async def failed(self, fault: Fault) -> str:
        # Nothing was sent yet, so the error is an ordinary status (504 for a stall, as a proxy would).
        self._status = 504 if fault.reason == "stall" else 500
        self._body = json.dumps({"error": fault.error}).encode()
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
