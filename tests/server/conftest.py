"""Fixtures for the server tests: the tiny tokenizer, real servers on loopback, an SSE reader.

Servers are session-scoped (`python -m server --engine synthetic` starts in ~1 s) and shared by
the test modules; a test that needs a failure mode server-wide starts its own.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx
import pytest

from server.launcher import ServerHandle, running_server

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def server(model_dir: str) -> Iterator[ServerHandle]:
    """The synthetic engine with small limits; failure modes chosen per request via `lab`."""
    with running_server(["--engine", "synthetic", "--slots", "4", "--max-queue", "8",
                         "--max-body-bytes", "65536"]) as handle:
        yield handle


@pytest.fixture()
def api(server: ServerHandle) -> Iterator["Api"]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield Api(client, server)


@dataclass
class StreamResult:
    status: int
    headers: httpx.Headers
    raw: bytes
    chunks: list[dict[str, Any]] = field(default_factory=list)  # every data JSON object
    comments: int = 0
    done: bool = False
    error: dict[str, Any] | None = None
    arrivals: list[float] = field(default_factory=list)  # monotonic time of each content chunk
    body_error: Exception | None = None  # the connection broke mid-body

    @property
    def content_chunks(self) -> list[dict[str, Any]]:
        return [c for c in self.chunks if c.get("choices") and c["choices"][0]["delta"].get("content")]

    @property
    def text(self) -> str:
        return "".join(c["choices"][0]["delta"]["content"] for c in self.content_chunks)

    @property
    def finish_reason(self) -> str | None:
        reasons = [c["choices"][0]["finish_reason"] for c in self.chunks
                   if c.get("choices") and c["choices"][0]["finish_reason"]]
        return reasons[-1] if reasons else None


def parse_events(raw: bytes, result: StreamResult, arrived: float | None = None) -> None:
    for event in raw.split(b"\n\n"):
        if not event:
            continue
        if event.startswith(b":"):
            result.comments += 1
            continue
        assert event.startswith(b"data: "), event
        data = event[len(b"data: "):]
        if data == b"[DONE]":
            result.done = True
            continue
        obj = json.loads(data)
        if "error" in obj:
            result.error = obj["error"]
            continue
        result.chunks.append(obj)
        if arrived is not None and obj.get("choices") and obj["choices"][0]["delta"].get("content"):
            result.arrivals.append(arrived)


class Api:
    def __init__(self, client: httpx.Client, server: ServerHandle) -> None:
        self.client = client
        self.server = server

    @staticmethod
    def body(**fields: Any) -> dict[str, Any]:
        base: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
        base.update(fields)
        return base

    def stream(self, **fields: Any) -> StreamResult:
        """POST a streaming request and read it to the end, event by event as bytes arrive."""
        fields.setdefault("stream", True)
        buffer = b""
        with self.client.stream("POST", "/v1/chat/completions", json=self.body(**fields)) as response:
            result = StreamResult(response.status_code, response.headers, b"")
            try:
                for data in response.iter_raw():
                    arrived = time.monotonic()
                    result.raw += data
                    buffer += data
                    complete, _, buffer = buffer.rpartition(b"\n\n")
                    if complete:
                        parse_events(complete + b"\n\n", result, arrived)
            except httpx.HTTPError as exc:  # an abrupt close mid-body
                result.body_error = exc
        return result

    def complete(self, **fields: Any) -> httpx.Response:
        return self.client.post("/v1/chat/completions", json=self.body(**fields))

    def metric(self, name: str) -> float:
        return self.server.metrics().get(name, 0.0)
