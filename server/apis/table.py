"""The table of wire protocols: every tool of the lab that takes `--api` reads its names here."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Api:
    name: str  # what `--api` takes
    path: str  # the route a client POSTs to
    title: str  # its name in reports and docs
    docs: str  # the reference its events follow


CHAT = Api("chat", "/v1/chat/completions", "OpenAI Chat Completions",
           "https://platform.openai.com/docs/api-reference/chat-streaming")
RESPONSES = Api("responses", "/v1/responses", "OpenAI Responses",
                "https://platform.openai.com/docs/api-reference/responses-streaming")
MESSAGES = Api("messages", "/v1/messages", "Anthropic Messages",
               "https://docs.anthropic.com/en/api/messages-streaming")

APIS: dict[str, Api] = {api.name: api for api in (CHAT, RESPONSES, MESSAGES)}
DEFAULT_API = CHAT.name
