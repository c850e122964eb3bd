"""The request body of POST /v1/chat/completions, validated once at the edge (pydantic 2).

Strict types (a string is not a number), OpenAI's limits (temperature 0..2, top_p 0..1, seed a
signed 64-bit integer, at most 4 stop sequences, n = 1 only here), finite floats only. Unknown top-level fields are ignored, as SDKs send extras; the
`lab` object forbids unknown fields so a typo in a scenario fails loudly (400, param `lab.<field>`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator

from server.knobs import KNOBS, STREAM_KNOBS, Knob

# Floats are finite; JSON numbers beyond them (1e999) or NaN literals are refused, not clamped.
Finite = Field(allow_inf_nan=False)


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


class _LabBase(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    def stream_overrides(self) -> dict[str, Any]:
        """The StreamSettings fields this request set explicitly (None given = switched off)."""
        overrides: dict[str, Any] = {}
        for knob in STREAM_KNOBS:
            if knob.name not in self.model_fields_set:
                continue
            value = getattr(self, knob.name)
            # null means "off" for the timers; for the others it means "the server's default".
            if value is None and not knob.off_at_zero:
                continue
            overrides[knob.name] = value
        return overrides


def _lab_field(knob: Knob) -> tuple[Any, Any]:
    """The schema field of one knob: its type, its range (knob.check), its default."""
    checked = AfterValidator(knob.check)
    base: Any
    if knob.kind == "float":
        base = Annotated[float, Field(allow_inf_nan=False), checked]
    elif knob.kind == "int":
        base = Annotated[int, checked]
    elif knob.kind == "bool":
        base = bool
    elif knob.kind == "str":
        base = str
    elif knob.kind == "choice":
        base = Literal[knob.choices]  # type: ignore[valid-type]
    else:
        base = Annotated[list[str], checked]
    # A per-stream knob unset or null defers to the server's flag; a lab-only knob whose default
    # is None is optional, the others (delays of 0 s, stamp off) are plain values.
    if knob.flag or knob.default is None:
        return base | None, Field(default=None, description=knob.help)
    return base, Field(default=knob.default, description=knob.help)


def _lab_doc() -> str:
    lines = ["The `lab` request extension: per-request pacing and faults, and overrides of the",
             "server's per-stream flags (server/knobs.py declares each one):", ""]
    lines += [f"{k.name:<20} {k.range_text()}: {k.help}" for k in KNOBS]
    return "\n".join(lines)


LabOptions = create_model("LabOptions", __base__=_LabBase, __doc__=_lab_doc(),
                          __module__=__name__,
                          **{knob.name: _lab_field(knob) for knob in KNOBS})


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

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
