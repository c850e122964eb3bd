"""Canned SSE streams of each wire protocol, event by event in the shapes the official SDKs define.

Each builder gives the stream of one scripted answer as three parts: the lifecycle events before
the first text delta (Responses: created ... content_part.added; Messages: message_start,
content_block_start and a ping; chat: the role chunk), one frame per text delta, and the events
that end it (the terminal event last). `sdk_type` parses one payload with the SDK's own type
(openai.types.responses.ResponseStreamEvent, anthropic.types.RawMessageStreamEvent,
openai.types.chat.ChatCompletionChunk), so a shape drifting from the SDK's fails a test.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Frame = bytes


def frame(data: dict[str, Any] | str, event: str | None = None) -> Frame:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


@dataclass
class Canned:
    before: list[Frame]  # lifecycle events before the first text delta
    deltas: list[Frame]  # one per text delta
    after: list[Frame]  # the events that end it, the terminal event last
    payloads: list[tuple[dict[str, Any], str | None]]  # every JSON event and its `event:` name


def _canned(events: list[tuple[dict[str, Any] | str, str | None]], is_delta, is_end) -> Canned:
    out = Canned([], [], [], [])
    for data, name in events:
        if isinstance(data, dict):
            out.payloads.append((data, name))
        part = out.deltas if is_delta(data) else (out.after if out.deltas and is_end(data) else out.before)
        part.append(frame(data, name))
    return out


# ---- OpenAI Responses ---------------------------------------------------------------------

RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "tiny", "output": [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "in_progress"}
USAGE = {"input_tokens": 3, "output_tokens": 3, "total_tokens": 6,
         "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
         "output_tokens_details": {"reasoning_tokens": 0}}
ITEM = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
PART = {"type": "output_text", "text": "", "annotations": []}


def responses(texts: list[str], end: str = "response.completed") -> Canned:
    """`end`: response.completed, response.failed, error, or none (the stream just stops)."""
    seq = iter(range(1000))
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": RESPONSE},
        {"type": "response.in_progress", "response": RESPONSE},
        {"type": "response.output_item.added", "output_index": 0, "item": ITEM},
        {"type": "response.content_part.added", **where, "part": PART},
        *({"type": "response.output_text.delta", **where, "delta": t, "logprobs": []} for t in texts),
        {"type": "response.output_text.done", **where, "text": "".join(texts), "logprobs": []},
    ]
    if end == "response.completed":
        events.append({"type": end, "response": {**RESPONSE, "status": "completed", "usage": USAGE}})
    elif end == "response.failed":
        events.append({"type": end, "response": {**RESPONSE, "status": "failed",
                                                 "error": {"code": "server_error", "message": "engine failed"}}})
    elif end == "error":
        events.append({"type": "error", "code": "server_error", "message": "engine failed", "param": None})
    # Each event is named by its type, as OpenAI sends them; each carries the next sequence number.
    return _canned([({**e, "sequence_number": next(seq)}, e["type"]) for e in events],
                   lambda d: d["type"] == "response.output_text.delta",
                   lambda d: d["type"] != "response.output_text.delta")


# ---- Anthropic Messages -------------------------------------------------------------------

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "tiny",
           "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def messages(texts: list[str], end: str = "message_stop", named: bool = True) -> Canned:
    """`end`: message_stop, error (an overloaded_error after the deltas), or none.
    `named=False`: the `event:` lines dropped, as a hop that forwards only `data:` lines."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": MESSAGE},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
          for t in texts),
    ]
    if end == "error":
        events.append(OVERLOADED)
    else:
        events += [{"type": "content_block_stop", "index": 0},
                   {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": len(texts)}}]
        if end == "message_stop":
            events.append({"type": "message_stop"})
    return _canned([(e, e["type"] if named else None) for e in events],
                   lambda d: d["type"] == "content_block_delta",
                   lambda d: d["type"] != "content_block_delta")


# ---- OpenAI Chat Completions --------------------------------------------------------------

def chat(texts: list[str], end: str = "[DONE]") -> Canned:
    """`end`: [DONE], or none."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "tiny",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[dict[str, Any] | str, str | None]] = [
        (chunk({"role": "assistant", "content": ""}), None),
        *((chunk({"content": t}), None) for t in texts),
        (chunk({}, "stop"), None),
    ]
    if end == "[DONE]":
        events.append(("[DONE]", None))
    return _canned(events, lambda d: isinstance(d, dict) and bool(d["choices"][0]["delta"].get("content")),
                   lambda d: True)


CANNED = {"chat": chat, "responses": responses, "messages": messages}


def sdk_type(api: str, payload: dict[str, Any]) -> str:
    """The SDK type that parses `payload` (pydantic raises when the shape is not the SDK's)."""
    from pydantic import TypeAdapter

    if api == "responses":
        from openai.types.responses import ResponseStreamEvent as Union_
    elif api == "messages":
        from anthropic.types import RawMessageStreamEvent as Union_
    else:
        from openai.types.chat import ChatCompletionChunk as Union_
    if payload.get("type") == "ping" and api == "messages":  # the SDK skips it (_streaming.py)
        return "ping"
    if payload.get("type") == "error" and api == "messages":  # the SDK raises on it, no type
        from anthropic.types import ErrorResponse
        return type(ErrorResponse.model_validate(payload)).__name__
    return type(TypeAdapter(Union_).validate_python(payload)).__name__
