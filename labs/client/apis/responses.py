"""OpenAI Responses as the client speaks it: `input` in, typed events out, `response.completed` last.

Every event's `data:` carries its `type` and a monotonic `sequence_number`; the OpenAI SDK reads
the `type` (openai/_streaming.py), so this does too, and falls back to the `event:` name.
There is no `[DONE]`: a stream is complete when `response.completed` (or `response.incomplete`,
a reply cut by `max_output_tokens`, still a whole stream) arrives; `response.failed` and `error`
are in-band errors. https://platform.openai.com/docs/api-reference/responses-streaming
"""
from __future__ import annotations

from typing import Any, Mapping

from labs.client.apis.base import ClientApi, Prompt, bearer, json_object, lifecycle, messages_of, stamp, with_lab
from labs.client.sse import Classified
from server.apis.table import RESPONSES

TEXT_DELTA = "response.output_text.delta"
TERMINAL = ("response.completed", "response.incomplete")


def body(model: str, prompt: Prompt, max_tokens: int, lab: Mapping[str, Any] | None = None,
         **fields: Any) -> dict[str, Any]:
    # `input` takes chat-style messages as they are (EasyInputMessage: role and content).
    return with_lab({"model": model, "input": messages_of(prompt), "stream": True,
                     "max_output_tokens": max_tokens}, fields, lab)


def classify(payload: str, event_name: str | None = None) -> Classified:
    obj = json_object(payload)
    if obj is None:  # a `[DONE]` a relay added is no event of this protocol, and ends nothing
        return "other", payload[:200], None, None, None
    sent_at = stamp(obj)
    kind = obj.get("type") if isinstance(obj.get("type"), str) else event_name or ""
    if kind == TEXT_DELTA:
        delta = obj.get("delta")
        if isinstance(delta, str) and delta:
            return "content", delta, None, sent_at, None
        return lifecycle(kind, sent_at)
    response = obj.get("response") if isinstance(obj.get("response"), dict) else {}
    if kind in TERMINAL:
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return "done", "", reason or response.get("status") or kind, sent_at, response.get("usage")
    if kind == "response.failed":
        error = response.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        return "error", str(message or error or "response.failed"), None, sent_at, error
    if kind == "error":  # ResponseErrorEvent: code, message, param at the top level
        return "error", str(obj.get("message") or obj.get("code") or payload[:200]), None, sent_at, obj
    if kind == "response.created" and isinstance(response.get("id"), str):
        # Its id is what a resume (`GET /v1/responses/{id}?stream=true&starting_after=N`) names.
        return lifecycle(f"{kind} {response['id']}", sent_at)
    return lifecycle(kind, sent_at)


API = ClientApi(api=RESPONSES, body=body, classify=classify, auth_headers=bearer)
