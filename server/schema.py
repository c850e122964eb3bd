"""The request body of POST /v1/chat/completions, validated once at the edge (pydantic 2).

Strict types (a string is not a number), OpenAI's limits (temperature 0..2, top_p 0..1, at most 4
stop sequences, n = 1 only here). Unknown top-level fields are ignored, as SDKs send extras; the
`lab` object forbids unknown fields so a typo in a scenario fails loudly (400, param `lab.<field>`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from server.config import (
    STREAMING_HEADER_NAMES,
    DetokenizerKind,
    DisconnectMode,
    ErrorMode,
)

NonNegative = Annotated[float, Field(ge=0, le=86_400)]


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
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool = False


class LabOptions(BaseModel):
    """The `lab` request extension (contract.md), plus per-request overrides of failure modes.

    script               exact text to emit (teacher-forced: one real forward pass per token)
    tokens_per_s         pacing of emitted tokens (engine side: each token computed when due)
    headers_delay_s      silence before the response headers (the request waits, then is admitted)
    first_token_delay_s  silence after the headers and the role chunk, before the first token
    pause_after_tokens, pause_s   one silence after that many tokens
    error_after_tokens   fail after that many tokens (in-band error, or per error_mode)
    abort_after_tokens   drop the connection after that many tokens: no final chunk, no [DONE],
                         no end of the chunked body (the client sees an incomplete read)
    stamp                add "sent_at" (wall clock, float seconds, taken at the write) to every
                         data chunk
    Overrides of the server's flags, for this request only (null for a timer = off; null for the
    others = the server's default):
    detokenizer "incremental"|"naive", stop_holdback bool, disconnect "abort"|"ignore",
    heartbeat_s float (0 = none), error_mode "inband"|"silent-close"|"fake-done",
    coalesce_ms float (0 = off), omit_headers [names of streaming headers], stall_timeout_s float.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    # What the model emits and when.
    script: str | None = None
    tokens_per_s: Annotated[float, Field(gt=0, le=1_000_000)] | None = None
    headers_delay_s: NonNegative = 0.0
    first_token_delay_s: NonNegative = 0.0
    pause_after_tokens: Annotated[int, Field(ge=0)] | None = None
    pause_s: NonNegative = 0.0
    error_after_tokens: Annotated[int, Field(ge=0)] | None = None
    abort_after_tokens: Annotated[int, Field(ge=0)] | None = None
    stamp: bool = False
    # Overrides of the server's --flags for this request only (config.StreamSettings).
    detokenizer: DetokenizerKind | None = None
    stop_holdback: bool | None = None
    disconnect: DisconnectMode | None = None
    heartbeat_s: NonNegative | None = None
    error_mode: ErrorMode | None = None
    coalesce_ms: Annotated[float, Field(ge=0, le=10_000)] | None = None
    omit_headers: list[str] | None = None
    stall_timeout_s: NonNegative | None = None

    @field_validator("omit_headers")
    @classmethod
    def _known_headers(cls, names: list[str] | None) -> list[str] | None:
        for name in names or ():
            if name.lower() not in STREAMING_HEADER_NAMES:
                raise ValueError(f"{name!r} is not one of {', '.join(STREAMING_HEADER_NAMES)}")
        return names

    def stream_overrides(self) -> dict[str, Any]:
        """The StreamSettings fields this request set explicitly (None given = switched off)."""
        fields = ("detokenizer", "stop_holdback", "disconnect", "heartbeat_s", "error_mode",
                  "coalesce_ms", "omit_headers", "stall_timeout_s")
        overrides: dict[str, Any] = {}
        for name in fields:
            if name not in self.model_fields_set:
                continue
            value = getattr(self, name)
            # null means "off" for the timers; for the others it means "the server's default".
            if value is None and name not in ("heartbeat_s", "stall_timeout_s"):
                continue
            overrides[name] = value
        return overrides


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: int | None = None
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
