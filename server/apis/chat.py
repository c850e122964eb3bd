"""`POST /v1/chat/completions` (OpenAI Chat Completions): the request body, validated once at the
edge (pydantic 2), and what a reply looks like (server/stream/sse.py frames its chunks).

Strict types (a string is not a number), OpenAI's limits (temperature 0..2, top_p 0..1, seed a
signed 64-bit integer, at most 4 stop sequences, n = 1 only here), finite floats only. Unknown
top-level fields are ignored, as SDKs send extras.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from server.apis.base import openai_failure, text_of
from server.apis.lab import Finite, LabOptions
from server.stream import sse
from server.stream.completion_job import CompletionJob, Wire


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None

    def text(self) -> str:
        return text_of(self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    prompt_param: ClassVar[str] = "messages"

    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Finite, Field(ge=0, le=2)] | None = None
    # A top_p too small for float32 still keeps the most likely token (the sampler's job).
    top_p: Annotated[float, Finite, Field(gt=0, le=1)] | None = None
    # OpenAI's seed is a 64-bit signed integer; beyond it is a 400, never an overflow deeper in.
    seed: Annotated[int, Field(ge=-(2**63), le=2**63 - 1)] | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    n: int | None = None
    lab: LabOptions | None = None

    @field_validator("stop")
    @classmethod
    def _non_empty_stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        for text in [stop] if isinstance(stop, str) else stop or ():
            if not text:
                raise ValueError("stop sequences must not be empty")
        return stop

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int | None) -> int | None:
        if n is not None and n != 1:
            raise ValueError("only n = 1 is supported")
        return n

    @property
    def stop_sequences(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def max_tokens_param(self) -> str:
        return "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"

    def prompt_messages(self) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.text()} for m in self.messages]


def chat_framer(job: CompletionJob) -> sse.ChunkFramer:
    """`chat.completion.chunk` frames (server/stream/sse.py `ChunkFramer`, kept there beside the
    SSE primitives its hot path is built from)."""
    return sse.ChunkFramer(job.completion_id, job.created, job.model, job.system_fingerprint,
                           job.include_usage, job.stamp, job.pad_bytes)


def chat_reply(job: CompletionJob, text: str, finish_reason: str) -> dict[str, Any]:
    generation = job.generation
    return sse.completion_object(job.completion_id, job.created, job.model,
                                 job.system_fingerprint, text, finish_reason,
                                 generation.prompt_tokens, generation.completion_tokens)


CHAT_WIRE = Wire(chat_framer, chat_reply, openai_failure)
