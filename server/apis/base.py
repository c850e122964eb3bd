"""What every protocol's request becomes before admission, and the error shape of OpenAI's APIs.

`Service.admit` (server/http/service.py) reads a parsed request through `AdmittedRequest` alone, so the
engine, the knobs, the limits and the metrics are the same whichever protocol it came in.
"""
from __future__ import annotations

from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from server.apis.lab import LabOptions
from server.errors import APIError
from server.stream.completion_job import CompletionJob, Fault


# The parts whose text is the prompt: chat's and Anthropic's `text`, Responses' `input_text` and
# `output_text` (an earlier answer sent back).
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


class ContentPart(BaseModel):
    """A part of a Responses or Messages content list: any type the API has (images, tool
    results, thinking: what the coding agents send back in later turns), of which only the text
    parts make the prompt."""

    model_config = ConfigDict(extra="ignore", strict=True)
    type: str
    text: str | None = None


class AdmittedRequest(Protocol):
    """A parsed request of any protocol, as admission reads it."""

    prompt_param: ClassVar[str]  # the field a too-long prompt is blamed on (`messages`, `input`)
    model: str
    stream: bool
    temperature: float | None
    top_p: float | None
    lab: LabOptions | None

    @property
    def seed(self) -> int | None: ...
    @property
    def stop_sequences(self) -> list[str]: ...
    @property
    def requested_max_tokens(self) -> int | None: ...
    @property
    def max_tokens_param(self) -> str: ...  # its name in this protocol, for a 400
    @property
    def include_usage(self) -> bool: ...
    def prompt_messages(self) -> list[dict[str, str]]: ...  # [{"role", "content"}], system first


def openai_error(error: APIError) -> tuple[int, dict[str, Any]]:
    """OpenAI's HTTP error: `{"error": {"message", "type", "param", "code"}}` (chat, responses)."""
    return error.status, error.body()


def openai_failure(job: CompletionJob, fault: Fault) -> tuple[int, dict[str, Any]]:
    """A non-stream reply that failed before its first byte: 504 for a stall (as a proxy would),
    else 500, with the error in OpenAI's shape."""
    return (504 if fault.reason == "stall" else 500), {"error": fault.error}


def text_of(content: Any) -> str:
    """A message's text: a string, or the `text` of its parts (None: empty)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text or "" for part in content if part.type in TEXT_PART_TYPES)


