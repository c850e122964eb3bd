"""The seam between the HTTP layer and the engines: requests in, token ids out.

The HTTP edge (server/http/service.py admits) and the stream (server/stream/streaming.py reads the
tokens) never see torch; an engine never sees HTTP. An engine owns a fixed number of slots
(sequences decoded together, the KV-cache slots) and a bounded queue of requests waiting for one.
Pacing lives here, in the decode loop, so that each token is computed when it is due instead of
being computed ahead into an unbounded buffer.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import AsyncIterator, Literal, NamedTuple


class QueueFull(Exception):
    """Every slot is busy and the waiting queue is full: the HTTP layer answers 429."""

    def __init__(self, retry_after_s: float = 1.0) -> None:
        super().__init__("the server is at capacity: every slot is busy and the queue is full")
        self.retry_after_s = retry_after_s


class EngineStopped(Exception):
    """The engine was closed, or its decode loop died, while a request was in flight."""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None


@dataclass(frozen=True)
class Pacing:
    """When each token is due, relative to the moment the request gets a slot.

    first_token_delay_s: silence before the first token (prefill, in the lab's terms).
    tokens_per_s: None means as fast as the engine can go.
    pause_after_tokens / pause_s: one silence in the middle of the stream.
    """

    tokens_per_s: float | None = None
    first_token_delay_s: float = 0.0
    pause_after_tokens: int | None = None
    pause_s: float = 0.0


@dataclass(frozen=True)
class GenerationRequest:
    prompt_ids: list[int]
    max_new_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    pacing: Pacing = field(default_factory=Pacing)
    # Teacher forcing: the engine still runs one real forward pass per token, but masks every
    # logit except the next forced id. Generation ends after the last forced id.
    forced_ids: list[int] | None = None
    # Generation ends (finish "stop") when one of these is produced; it is not yielded.
    eos_token_ids: frozenset[int] = frozenset()


FinishReason = Literal["stop", "length", "cancelled", "error"]


class TokenEvent(NamedTuple):
    """One token (a tuple: made once per token per stream, ~3x cheaper than a frozen dataclass)."""

    token_id: int
    index: int  # 0-based position in the generated sequence


class Generation(abc.ABC):
    """One request's stream of tokens. Iterate it; cancel it when the client has gone."""

    finish_reason: FinishReason | None = None
    # What went wrong, when finish_reason is "error" (a message for the in-band error).
    error: str | None = None

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[TokenEvent]:
        """Yields tokens as the decode loop produces them; ends when generation finishes.

        Waiting for a slot happens inside the first iteration. Raises EngineStopped if the
        engine dies, and finish_reason tells why the stream ended once iteration is over.
        """

    @abc.abstractmethod
    def cancel(self, reason: str = "disconnect") -> None:
        """Stop generating: the slot is freed within one decode step (or the queue entry dropped).

        With reason "disconnect", the token in flight counts in tokens_after_disconnect and the
        time until the slot is free in slot_held_after_disconnect_seconds."""

    def mark_client_gone(self) -> None:
        """The client has gone but generation goes on (the no-disconnect-handling failure mode):
        every token produced from now on counts in streamlab_tokens_after_disconnect_total."""

    @property
    @abc.abstractmethod
    def prompt_tokens(self) -> int: ...

    @property
    @abc.abstractmethod
    def completion_tokens(self) -> int: ...


class Engine(abc.ABC):
    """Continuous batching over a fixed number of slots, behind a bounded queue."""

    name: str
    slots: int
    max_queue: int

    @abc.abstractmethod
    async def start(self) -> None:
        """Load what is needed and start the decode loop (off the event loop unless told otherwise)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop the decode loop; in-flight generations end with EngineStopped."""

    @abc.abstractmethod
    def submit(self, request: GenerationRequest) -> Generation:
        """Admit a request or raise QueueFull at once, before any byte is streamed."""

    @property
    @abc.abstractmethod
    def healthy(self) -> bool:
        """True once the model is loaded and the decode loop runs."""

    @property
    @abc.abstractmethod
    def slots_in_use(self) -> int: ...

    @property
    @abc.abstractmethod
    def queued(self) -> int: ...


@dataclass(frozen=True)
class EngineConfig:
    """What `python -m server` passes to `server.engine.create_engine(config, tokenizer)`."""

    kind: Literal["transformers", "synthetic"] = "transformers"
    model: str = ".models/tiny"  # a local folder or a hub id (HF_HUB_OFFLINE=1: only if cached)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    slots: int = 8
    max_queue: int = 64
    # One torch thread on CPU: two gave large latency spikes on 2 cores (docs/environment.md).
    torch_threads: int = 1
    # Failure mode `server-blocking-loop`: run decode steps on the event loop thread itself.
    blocking_loop: bool = False
    # --serial-prefill: prefill one request per forward pass (before batched prefill), for the
    # benchmark's before/after in one run.
    serial_prefill: bool = False
