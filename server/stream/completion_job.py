"""What one admitted request carries into its reply (built by server/http/service.py `Service.admit`):
the generation, the text pipeline (detokenizer, then stop handling), the settings and the lab's
faults; the wire protocol's shapes (`Wire`, one per protocol in server/apis/); and the two ways a
reply ends early on purpose (server/stream/streaming.py raises them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from server import errors
from server.config import StreamSettings
from server.engine.base import Generation
from server.text.detokenizer import Detokenizer
from server.text.stops import StopHandler


class CompletionText:
    """Token ids -> the text the client may see: the detokenizer, then stop handling."""

    __slots__ = ("_detokenizer", "_stops")

    def __init__(self, detokenizer: Detokenizer, stops: StopHandler) -> None:
        self._detokenizer = detokenizer
        self._stops = stops

    @property
    def stopped(self) -> bool:
        return self._stops.stopped

    def push(self, token_id: int) -> str:
        text = self._detokenizer.push(token_id)
        return self._stops.push(text) if text else ""

    def finish(self) -> str:
        """Everything still held once generation has ended without a stop match."""
        if self._stops.stopped:
            return ""
        tail = self._detokenizer.flush()
        text = self._stops.push(tail) if tail else ""
        return text if self._stops.stopped else text + self._stops.flush()


class StreamFramer(Protocol):
    """The frames of one stream in one protocol (chat: server/stream/sse.py `ChunkFramer`; the
    others: server/apis/). The SSE writer decides when each leaves; the framer only what it is."""

    heartbeat: bytes  # what `heartbeat_s` of silence sends
    failure_end: tuple[bytes, ...]  # after the failure events, with error_mode `inband` (chat: [DONE])

    def opening(self) -> list[bytes]: ...  # before the first text (chat: the role chunk)
    def content(self, text: str) -> bytes: ...  # one text delta: the hot path
    def closing(self, finish_reason: str, prompt_tokens: int,
                completion_tokens: int) -> list[bytes]: ...  # the terminal event included
    def failure(self, fault: "Fault") -> list[bytes]: ...  # the protocol's in-band failure events


@dataclass(frozen=True)
class Wire:
    """What a protocol (server/apis/) gives a reply: its stream's framer, its non-stream reply
    object, and that reply's failure (a status and a body: nothing was sent yet)."""

    framer: Callable[["CompletionJob"], StreamFramer]
    reply: Callable[["CompletionJob", str, str], dict[str, Any]]  # (job, text, finish_reason)
    failure_reply: Callable[["CompletionJob", "Fault"], tuple[int, dict[str, Any]]]


@dataclass
class CompletionJob:
    """Everything one admitted request needs to be answered (built by server/http/service.py)."""

    generation: Generation
    text: CompletionText
    settings: StreamSettings
    completion_id: str
    created: int
    model: str
    system_fingerprint: str
    arrived_at: float  # time.monotonic() when the request arrived, for TTFT
    wire: Wire  # the protocol's shapes (server/apis/)
    include_usage: bool = False
    stamp: bool = False
    pad_bytes: int = 0
    error_after_tokens: int | None = None
    abort_after_tokens: int | None = None
    send_timeout_s: float | None = None  # --send-timeout-s: a write blocked longer aborts
    prompt_tokens: int = 0  # known at admission (Messages' message_start carries it)
    # Called with the protocol's final object when the reply ends (Responses: the store that
    # `GET /v1/responses/{id}` reads); None: nothing keeps it.
    keep: Callable[[dict[str, Any]], None] | None = None


class Fault(Exception):
    """A failure after the request was admitted: how it is reported depends on the mode."""

    def __init__(self, reason: str, message: str, type: str, code: str) -> None:
        super().__init__(message)
        self.reason = reason  # the label of streamlab_requests_aborted_total
        self.error = errors.error_body(message, type, None, code)["error"]


class AbortOnPurpose(Exception):
    """lab.abort_after_tokens: end like a crash, without a final chunk, [DONE] or body end."""
