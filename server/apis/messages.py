"""`POST /v1/messages` (Anthropic Messages): the request, the stream's events, the reply, the errors.

The events are the ones Anthropic documents (https://docs.anthropic.com/en/api/messages-streaming),
each an `event:` line and a `data:` object carrying `type`:

    message_start, content_block_start, ping, content_block_delta (text_delta) ...,
    content_block_stop, message_delta (stop_reason, usage.output_tokens), message_stop

`event: ping` follows the block's start, as Anthropic sends it, and then every `heartbeat_s` of
silence. A failure after the 200 is `event: error` with `{"type": "error", "error": {"type":
"overloaded_error" | "api_error", ...}}`, as Anthropic sends it mid-stream; the `anthropic` SDK
raises it as an `APIStatusError`. Before the first byte an error is Anthropic's HTTP error
(https://docs.anthropic.com/en/api/errors): `{"type": "error", "error": {"type", "message"}}`,
a full queue 529 `overloaded_error` ("Anthropic's API is temporarily overloaded"; 429
`rate_limit_error` is an account's own rate limit, which this server has none of).
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.apis.base import ContentPart, text_of
from server.apis.lab import Finite, LabOptions
from server.errors import APIError
from server.stream.completion_job import CompletionJob, Fault, Wire
from server.stream.sse import OpenFrame, compact_json, quoted

# The header Anthropic requires on every request (400 without it: a hop that strips it shows).
VERSION_HEADER = "anthropic-version"
KEY_HEADER = "x-api-key"  # accepted, never checked (as chat ignores Authorization)
OVERLOADED = 529  # https://docs.anthropic.com/en/api/errors
# An HTTP status -> Anthropic's error type (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 504: "timeout_error", OVERLOADED: "overloaded_error"}
PING = b'event: ping\ndata: {"type": "ping"}\n\n'


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    # "system" too: Claude Code 2.1.332 sends its environment notes as a system message inside
    # `messages` (beta mid-conversation-tool-changes-2026-07-01), which Anthropic's API takes for
    # the models that support it (anthropics/claude-code#61412 quotes the refusal of one that
    # does not). Refused, Claude Code sent every prompt twice: a 400, then the request without it.
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentPart]


class MessagesRequest(BaseModel):
    """The fields of a text request; the others (tools, metadata, top_k, thinking) are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)
    prompt_param: ClassVar[str] = "messages"

    model: str
    messages: Annotated[list[Message], Field(min_length=1)]
    system: str | list[ContentPart] | None = None
    max_tokens: Annotated[int, Field(ge=1)]  # required, as Anthropic requires it
    stream: bool = False
    temperature: Annotated[float, Finite, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Finite, Field(gt=0, le=1)] | None = None
    stop_sequences: list[Annotated[str, Field(min_length=1)]] = []
    lab: LabOptions | None = None

    seed: ClassVar[None] = None  # Anthropic takes no seed
    include_usage: ClassVar[bool] = True  # message_delta always carries it
    max_tokens_param: ClassVar[str] = "max_tokens"

    @property
    def requested_max_tokens(self) -> int:
        return self.max_tokens

    def prompt_messages(self) -> list[dict[str, str]]:
        system = text_of(self.system)
        messages = [{"role": "system", "content": system}] if system else []
        return messages + [{"role": m.role, "content": text_of(m.content)} for m in self.messages]


def stop_reason(job: CompletionJob, finish_reason: str) -> str:
    if finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if job.text.stopped else "end_turn"


def message_object(job: CompletionJob, content: list[dict[str, Any]], reason: str | None,
                   input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"id": job.completion_id, "type": "message", "role": "assistant", "model": job.model,
            "content": content, "stop_reason": reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def http_error(error: APIError) -> tuple[int, dict[str, Any]]:
    """An error before the first byte, in Anthropic's status and shape."""
    status = OVERLOADED if error.code == "queue_full" else error.status
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return status, error_body(kind, error.message)


def fault_type(fault: Fault) -> str:
    """The injected fault is what Anthropic sends mid-stream under load; the server's own are
    `api_error` ("an unexpected error has occurred internal to Anthropic's systems")."""
    return "overloaded_error" if fault.error.get("code") == "injected_error" else "api_error"


class MessageFramer:
    """The events of one Messages stream; a delta is two byte strings around its escaped text."""

    heartbeat = PING
    failure_end: tuple[bytes, ...] = ()  # `event: error` is itself the end

    def __init__(self, job: CompletionJob) -> None:
        self.job = job
        self.stamp = job.stamp
        self._pad = pad = b',"pad":"' + b"x" * job.pad_bytes + b'"' if job.pad_bytes else b""
        self._delta_head = (b'event: content_block_delta\ndata: {"type":"content_block_delta",'
                            b'"index":0,"delta":{"type":"text_delta","text":')
        self._delta_tail = b"}" + pad

    def _event(self, kind: str, fields: dict[str, Any], pad: bytes = b"") -> bytes:
        body = (b"event: " + kind.encode() + b"\ndata: " + compact_json({"type": kind, **fields})[:-1]
                + pad)
        return OpenFrame(body) if self.stamp else body + b"}\n\n"

    def opening(self) -> list[bytes]:
        start = message_object(self.job, [], None, self.job.prompt_tokens, 0)
        # `pad_bytes` pads the first event too, as chat pads its role chunk.
        return [self._event("message_start", {"message": start}, self._pad),
                self._event("content_block_start", {"index": 0,
                                                     "content_block": {"type": "text", "text": ""}}),
                PING]

    def content(self, text: str) -> bytes:
        """A text delta: the hot path, one per emitted piece of text."""
        body = self._delta_head + quoted(text) + self._delta_tail
        return OpenFrame(body) if self.stamp else body + b"}\n\n"

    def closing(self, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> list[bytes]:
        return [self._event("content_block_stop", {"index": 0}),
                self._event("message_delta", {
                    "delta": {"stop_reason": stop_reason(self.job, finish_reason),
                              "stop_sequence": None},
                    "usage": {"output_tokens": completion_tokens}}),
                self._event("message_stop", {})]

    def failure(self, fault: Fault) -> list[bytes]:
        return [self._event("error", {"error": {"type": fault_type(fault),
                                                "message": fault.error["message"]}})]


def message_reply(job: CompletionJob, text: str, finish_reason: str) -> dict[str, Any]:
    generation = job.generation
    return message_object(job, [{"type": "text", "text": text}], stop_reason(job, finish_reason),
                          generation.prompt_tokens, generation.completion_tokens)


def message_failure(job: CompletionJob, fault: Fault) -> tuple[int, dict[str, Any]]:
    """A non-stream reply that failed before its first byte, in Anthropic's status and shape."""
    kind = "timeout_error" if fault.reason == "stall" else fault_type(fault)
    status = {"timeout_error": 504, "overloaded_error": OVERLOADED}.get(kind, 500)
    return status, error_body(kind, fault.error["message"])


MESSAGES_WIRE = Wire(MessageFramer, message_reply, message_failure)
