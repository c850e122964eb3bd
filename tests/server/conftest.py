"""Fixtures for the server tests: the tiny tokenizer, real servers on loopback, a stream reader.

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

from labs.client.results import Event, StreamResult
from labs.client.sse import SSEParser, classify
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
class Reply(StreamResult):
    """One streamed reply as the server's tests read it: the lab's StreamResult (events, text,
    outcome; parsed by the lab's own SSE parser), here filled from httpx, which the SDKs use,
    plus the wire the tests check: the raw body, every JSON chunk, the in-band error object."""

    raw: bytes = b""
    chunks: list[dict[str, Any]] = field(default_factory=list)  # every data object but errors
    content_chunks: list[dict[str, Any]] = field(default_factory=list)  # those carrying content
    error_object: dict[str, Any] | None = None  # the in-band `{"error": {...}}`
    body_error: Exception | None = None  # the connection broke mid-body

    def feed(self, parser: SSEParser, data: bytes, t: float) -> None:
        """One piece of the body as it arrived, `t` seconds after the request was sent."""
        self.raw += data
        self.reads += 1
        for item, payload, _event in parser.feed(data):
            if item == "comment":
                self.heartbeats += 1
                self.events.append(Event(t, self.reads, "comment", payload))
                continue
            kind, text, finish, _sent_at, extra = classify(payload)
            self.events.append(Event(t, self.reads, kind, text))
            self.finish_reason = finish or self.finish_reason
            if kind == "done":
                self.saw_done = True
                continue
            obj = json.loads(payload)
            if kind == "error":
                self.error, self.error_object = text, extra
                continue
            self.chunks.append(obj)
            if kind == "content":
                self.content_chunks.append(obj)
                self.text += text
                self.ttft_s = t if self.ttft_s is None else self.ttft_s
            elif kind == "usage":
                self.usage = extra

    def end(self) -> "Reply":
        self.outcome = ("http-error" if (self.status or 0) >= 400 else "error-in-band" if self.error
                        else "complete" if self.saw_done else "truncated")
        return self


class Api:
    def __init__(self, client: httpx.Client, server: ServerHandle) -> None:
        self.client = client
        self.server = server

    @staticmethod
    def body(**fields: Any) -> dict[str, Any]:
        base: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
        base.update(fields)
        return base

    def stream(self, **fields: Any) -> Reply:
        """POST a streaming request and read it to the end, event by event as bytes arrive."""
        fields.setdefault("stream", True)
        parser = SSEParser()
        sent = time.perf_counter()
        with self.client.stream("POST", "/v1/chat/completions", json=self.body(**fields)) as response:
            reply = Reply(url=str(response.url), status=response.status_code, headers=dict(response.headers),
                          http_version=response.http_version, ttfb_s=time.perf_counter() - sent)
            try:
                for data in response.iter_raw():
                    reply.feed(parser, data, time.perf_counter() - sent)
                    reply.e2e_s = time.perf_counter() - sent
                reply.body_complete = True
            except httpx.HTTPError as exc:  # an abrupt close mid-body
                reply.body_error = exc
        return reply.end()

    def complete(self, **fields: Any) -> httpx.Response:
        return self.client.post("/v1/chat/completions", json=self.body(**fields))

    def metric(self, name: str) -> float:
        return self.server.metrics().get(name, 0.0)
