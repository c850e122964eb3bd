"""Anthropic Messages as the client speaks it: named events, `message_stop` last, `event: ping` between.

The Anthropic SDK reads the `event:` name first (anthropic/_streaming.py): it skips `ping`, raises
on `error`, and drops an event that has no name, so a hop that forwards only `data:` lines leaves
it with nothing ("Stream completed without receiving message_start event"). This classifier
reads the stream the same way: an unnamed event is `other`, never a token.
https://docs.anthropic.com/en/api/messages-streaming
"""
from __future__ import annotations

from typing import Any, Mapping

from labs.client.apis.base import ClientApi, Prompt, json_object, lifecycle, messages_of, stamp, with_lab
from labs.client.sse import Classified
from server.apis.messages import KEY_HEADER, VERSION_HEADER
from server.apis.table import MESSAGES

# The API version every request names (https://docs.anthropic.com/en/api/versioning).
ANTHROPIC_VERSION = "2023-06-01"
# The Messages API refuses a request without `x-api-key`; a lab server takes any key.
PLACEHOLDER_KEY = "streamlab"
UNNAMED = "unnamed event (the Anthropic SDK drops it)"


def body(model: str, prompt: Prompt, max_tokens: int, lab: Mapping[str, Any] | None = None,
         **fields: Any) -> dict[str, Any]:
    messages = messages_of(prompt)
    # A system prompt is a top-level field here, not a message.
    system = [m["content"] for m in messages if m.get("role") == "system"]
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True,
                           "messages": [m for m in messages if m.get("role") != "system"]}
    if system:
        out["system"] = "\n".join(str(s) for s in system)
    return with_lab(out, fields, lab)


def api_key_header(api_key: str | None) -> dict[str, str]:
    return {KEY_HEADER: api_key or PLACEHOLDER_KEY}


def classify(payload: str, event_name: str | None = None) -> Classified:
    obj = json_object(payload)
    sent_at = stamp(obj) if obj is not None else None
    if event_name is None:
        return lifecycle(UNNAMED, sent_at)
    if obj is None:
        return "other", payload[:200], None, None, None
    if event_name == "error":  # {"type":"error","error":{"type":"overloaded_error","message":...}}
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        return "error", str(message or error or payload[:200]), None, sent_at, error
    kind = obj.get("type") if isinstance(obj.get("type"), str) else event_name
    if kind == "content_block_delta":
        delta = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
        text = delta.get("text")
        if delta.get("type") == "text_delta" and isinstance(text, str) and text:
            return "content", text, None, sent_at, None
        return lifecycle(f"{kind} {delta.get('type')}", sent_at)  # thinking, tool input: no text
    if kind == "message_delta":
        delta = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
        return "finish", "", delta.get("stop_reason"), sent_at, obj.get("usage")
    if kind == "message_stop":
        return "done", "", None, sent_at, None
    return lifecycle(kind, sent_at)  # message_start, content_block_start/stop, ping


API = ClientApi(api=MESSAGES, body=body, classify=classify, auth_headers=api_key_header,
                fixed_headers={VERSION_HEADER: ANTHROPIC_VERSION},
                heartbeat_events=frozenset({"ping"}))
