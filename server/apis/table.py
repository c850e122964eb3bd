"""The table of wire protocols: every tool of the lab that takes `--api` reads its names here.

A row names a protocol's route and everything the server needs to speak it: the request schema
(parsed into what admission reads, server/apis/base.py `AdmittedRequest`), the reply's shapes
(`wire`: the stream's framer, the non-stream object, a failure), the id prefix its objects carry,
and its HTTP error (status and body) before the first byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from server.apis.base import openai_error
from server.apis.chat import CHAT_WIRE, ChatCompletionRequest
from server.apis.messages import MESSAGES_WIRE, MessagesRequest
from server.apis.messages import http_error as anthropic_error
from server.apis.responses import RESPONSES_WIRE, ResponsesRequest
from server.errors import APIError
from server.stream.completion_job import Wire


@dataclass(frozen=True)
class Api:
    name: str  # what `--api` takes
    path: str  # the route a client POSTs to
    title: str  # its name in reports and docs
    docs: str  # the reference its events follow
    request: Any  # the pydantic model of its request body
    wire: Wire
    id_prefix: str  # its objects' ids: chatcmpl-..., resp_..., msg_...
    http_error: Callable[[APIError], tuple[int, dict[str, Any]]]


CHAT = Api("chat", "/v1/chat/completions", "OpenAI Chat Completions",
           "https://platform.openai.com/docs/api-reference/chat-streaming",
           ChatCompletionRequest, CHAT_WIRE, "chatcmpl-", openai_error)
RESPONSES = Api("responses", "/v1/responses", "OpenAI Responses",
                "https://platform.openai.com/docs/api-reference/responses-streaming",
                ResponsesRequest, RESPONSES_WIRE, "resp_", openai_error)
MESSAGES = Api("messages", "/v1/messages", "Anthropic Messages",
               "https://docs.anthropic.com/en/api/messages-streaming",
               MessagesRequest, MESSAGES_WIRE, "msg_", anthropic_error)

APIS: dict[str, Api] = {api.name: api for api in (CHAT, RESPONSES, MESSAGES)}
DEFAULT_API = CHAT.name
