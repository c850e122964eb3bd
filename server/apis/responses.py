"""`POST /v1/responses` (OpenAI Responses): the request, the stream's events, the reply object.

The events are the ones OpenAI documents for a text answer
(https://platform.openai.com/docs/api-reference/responses-streaming), each an `event:` line and a
`data:` object carrying `type` and a `sequence_number` counted from 0, with no `[DONE]`:

    response.created, response.in_progress, response.output_item.added,
    response.content_part.added, response.output_text.delta ..., response.output_text.done,
    response.content_part.done, response.output_item.done,
    response.completed (or response.incomplete when max_output_tokens ended it)

A failure after the first byte is `response.failed` (its `response.error` says what failed); the
`openai` SDK yields it as a `ResponseFailedEvent` (it raises only on a top-level `error` key).
Heartbeats are SSE comments (`: ping`): the API defines no keep-alive event, and the SDK skips
comments. The final object is kept (`job.keep`) for `GET /v1/responses/{id}`
(server/apis/response_store.py).
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.apis.base import ContentPart, openai_failure, text_of
from server.apis.lab import Finite, LabOptions
from server.stream.completion_job import CompletionJob, Fault, Wire
from server.stream.sse import PING, OpenFrame, compact_json, quoted

# What a Fault becomes in `response.error.code` (the SDK's ResponseError names its codes).
FAILED_CODE = "server_error"


class InputItem(BaseModel):
    """An item of `input`: a message (with a role), or another kind (a tool call's output, a
    reasoning item: what Codex sends back in later turns), which adds nothing to the prompt."""

    model_config = ConfigDict(extra="ignore", strict=True)
    type: str = "message"
    role: Literal["system", "developer", "user", "assistant"] | None = None
    content: str | list[ContentPart] | None = None


class ResponsesRequest(BaseModel):
    """The fields of a text request; the others (tools, reasoning, text format) are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)
    prompt_param: ClassVar[str] = "input"

    model: str
    input: str | Annotated[list[InputItem], Field(min_length=1)]
    instructions: str | None = None
    stream: bool = False
    store: bool = True  # false: not kept for GET /v1/responses/{id}
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Finite, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Finite, Field(gt=0, le=1)] | None = None
    lab: LabOptions | None = None

    seed: ClassVar[None] = None  # the Responses API takes no seed, no stop sequences
    stop_sequences: ClassVar[list[str]] = []
    include_usage: ClassVar[bool] = True  # response.completed always carries it
    max_tokens_param: ClassVar[str] = "max_output_tokens"

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_output_tokens

    def prompt_messages(self) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": self.instructions}] if self.instructions else []
        if isinstance(self.input, str):
            return messages + [{"role": "user", "content": self.input}]
        return messages + [{"role": m.role, "content": text_of(m.content)} for m in self.input
                           if m.role is not None]


def item_id(response_id: str) -> str:
    return "msg_" + response_id.removeprefix("resp_")


def output_item(response_id: str, text: str, status: str) -> dict[str, Any]:
    return {"id": item_id(response_id), "type": "message", "status": status, "role": "assistant",
            "content": [output_text(text)]}


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"input_tokens": prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + completion_tokens}


def response_object(response_id: str, created: int, model: str, status: str,
                    output: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None,
                    error: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `response` object, as the lifecycle events, the reply and `GET` carry it."""
    return {"id": response_id, "object": "response", "created_at": created, "status": status,
            "background": False, "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": None, "model": model, "output": output or [],
            "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": True,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "truncation": "disabled", "usage": usage, "metadata": {}}


def final_status(finish_reason: str) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


class ResponseFramer:
    """The events of one Responses stream. A delta is three byte strings joined around its
    sequence number and its JSON-escaped text, as chat's chunk frames are (server/stream/sse.py)."""

    heartbeat = PING
    failure_end: tuple[bytes, ...] = ()  # response.failed is itself the end

    def __init__(self, job: CompletionJob) -> None:
        self.job = job
        self.id = job.completion_id
        self.sequence = 0
        self.pieces: list[str] = []
        self.stamp = job.stamp
        self._pad = b',"pad":"' + b"x" * job.pad_bytes + b'"' if job.pad_bytes else b""
        self._delta_head = (b'event: response.output_text.delta\ndata: '
                            b'{"type":"response.output_text.delta","sequence_number":')
        self._delta_middle = (b',"item_id":' + quoted(item_id(self.id))
                              + b',"output_index":0,"content_index":0,"delta":')
        self._delta_tail = b',"logprobs":[]' + self._pad

    def _event(self, kind: str, fields: dict[str, Any], pad: bytes = b"") -> bytes:
        body = (b"event: " + kind.encode() + b'\ndata: {"type":' + quoted(kind)
                + b',"sequence_number":%d,' % self.sequence + compact_json(fields)[1:-1] + pad)
        self.sequence += 1
        return OpenFrame(body) if self.stamp else body + b"}\n\n"

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        job = self.job
        return response_object(self.id, job.created, job.model, status, **extra)

    def opening(self) -> list[bytes]:
        item = output_item(self.id, "", "in_progress")
        item["content"] = []
        # `pad_bytes` pads the first event too, as chat pads its role chunk.
        return [self._event("response.created", {"response": self._response("in_progress")},
                            self._pad),
                self._event("response.in_progress", {"response": self._response("in_progress")}),
                self._event("response.output_item.added", {"output_index": 0, "item": item}),
                self._event("response.content_part.added", {
                    "item_id": item["id"], "output_index": 0, "content_index": 0,
                    "part": output_text("")})]

    def content(self, text: str) -> bytes:
        """A text delta: the hot path, one per emitted piece of text."""
        self.pieces.append(text)
        body = (self._delta_head + b"%d" % self.sequence + self._delta_middle
                + quoted(text) + self._delta_tail)
        self.sequence += 1
        return OpenFrame(body) if self.stamp else body + b"}\n\n"

    def closing(self, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> list[bytes]:
        text = "".join(self.pieces)
        status = final_status(finish_reason)
        item = output_item(self.id, text, status)
        place = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        final = self._response(status, output=[item], usage=usage(prompt_tokens, completion_tokens))
        frames = [self._event("response.output_text.done", {**place, "text": text, "logprobs": []}),
                  self._event("response.content_part.done", {**place, "part": output_text(text)}),
                  self._event("response.output_item.done", {"output_index": 0, "item": item}),
                  self._event(f"response.{status}", {"response": final})]
        if self.job.keep is not None:
            self.job.keep(final)
        return frames

    def failure(self, fault: Fault) -> list[bytes]:
        error = {"code": FAILED_CODE, "message": fault.error["message"]}
        generation = self.job.generation
        final = self._response("failed", error=error,
                               usage=usage(generation.prompt_tokens, generation.completion_tokens))
        if self.job.keep is not None:
            self.job.keep(final)
        return [self._event("response.failed", {"response": final})]


def response_reply(job: CompletionJob, text: str, finish_reason: str) -> dict[str, Any]:
    generation = job.generation
    status = final_status(finish_reason)
    final = response_object(job.completion_id, job.created, job.model, status,
                            output=[output_item(job.completion_id, text, status)],
                            usage=usage(generation.prompt_tokens, generation.completion_tokens))
    if job.keep is not None:
        job.keep(final)
    return final


def response_failure(job: CompletionJob, fault: Fault) -> tuple[int, dict[str, Any]]:
    """A non-stream reply that failed before its first byte: OpenAI's error, and the stored
    response `failed`."""
    if job.keep is not None:
        job.keep(response_object(job.completion_id, job.created, job.model, "failed",
                                 error={"code": FAILED_CODE, "message": fault.error["message"]}))
    return openai_failure(job, fault)


RESPONSES_WIRE = Wire(ResponseFramer, response_reply, response_failure)
