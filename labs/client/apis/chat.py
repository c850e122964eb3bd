"""OpenAI Chat Completions as the client speaks it: `messages` in, `data:` chunks out, `[DONE]` last.

https://platform.openai.com/docs/api-reference/chat-streaming. The classifier is the one the
client always had (labs/client/sse.py: `classify`).
"""
from __future__ import annotations

from typing import Any, Mapping

from labs.client.apis.base import ClientApi, Prompt, bearer, messages_of, with_lab
from labs.client.sse import classify
from server.apis.table import CHAT


def body(model: str, prompt: Prompt, max_tokens: int, lab: Mapping[str, Any] | None = None,
         **fields: Any) -> dict[str, Any]:
    return with_lab({"model": model, "messages": messages_of(prompt), "stream": True,
                     "max_tokens": max_tokens}, fields, lab)


API = ClientApi(api=CHAT, body=body, classify=classify, auth_headers=bearer)
