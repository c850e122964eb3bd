"""The one module that writes Server-Sent Events: chunk frames, comments, errors, [DONE], headers.

Frames are built from templates prepared once per stream: everything of a chunk but the content
is fixed for the whole stream (id, created, model, fingerprint), so a content frame is three byte
strings joined around one JSON-escaped string (~1 us instead of ~5 us for json.dumps of a dict).

With `stamp`, a data frame must carry the wall clock of the moment it is written (with write
coalescing, later than the moment it was made). Such frames are built open (`OpenFrame`, the
object without its closing brace) and sealed by `seal()` when they leave.
"""
from __future__ import annotations

import functools
import json
import time
# The C escaper (when built): quotes a str as JSON and keeps non-ASCII as is (shorter frames).
from json.encoder import encode_basestring as _json_escape
from typing import Any, Iterable, Sequence

from server.config import STREAMING_HEADER_NAMES

DONE = b"data: [DONE]\n\n"
# A comment line: EventSource and the OpenAI SDK ignore it, proxies see bytes (idle timers reset).
PING = b": ping\n\n"
# `hello`: the same kind of comment right after the headers, so the body starts at once.
HELLO = b": ok\n\n"

STREAMING_HEADERS: dict[str, str] = {
    "content-type": "text/event-stream; charset=utf-8",
    # Intermediaries must not serve a stream from cache or hold it back for revalidation.
    "cache-control": "no-cache",
    # nginx: disable proxy buffering for this response even where `proxy_buffering on`
    # (https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_buffering).
    "x-accel-buffering": "no",
}
assert tuple(STREAMING_HEADERS) == STREAMING_HEADER_NAMES


NO_TRANSFORM = "no-cache, no-transform"  # the `no_transform` knob's Cache-Control


def streaming_headers(omit: Iterable[str] = (), no_transform: bool = False) -> list[tuple[bytes, bytes]]:
    """The ASGI header list of a stream, minus the ones a failure mode leaves out (a fresh
    list: a layer may append to it; built once per set of omitted names)."""
    return list(_streaming_headers(frozenset(name.lower() for name in omit), no_transform))


@functools.lru_cache(maxsize=64)
def _streaming_headers(left_out: frozenset[str], no_transform: bool) -> tuple[tuple[bytes, bytes], ...]:
    values = {**STREAMING_HEADERS, **({"cache-control": NO_TRANSFORM} if no_transform else {})}
    return tuple((name.encode(), value.encode()) for name, value in values.items()
                 if name not in left_out)


class OpenFrame(bytes):
    """A data frame without its closing `}` and blank line: `seal()` adds `"sent_at"` and closes it."""

    __slots__ = ()


def seal(frames: Sequence[bytes], sent_at: float | None = None) -> bytes:
    """The bytes of one write: open frames get `"sent_at": <wall clock>` as their last key."""
    if sent_at is None:
        return b"".join(frames)
    tail = b',"sent_at":%.6f}\n\n' % sent_at
    if len(frames) == 1:  # the common write: one frame
        frame = frames[0]
        return frame + tail if type(frame) is OpenFrame else frame
    return b"".join(frame + tail if type(frame) is OpenFrame else frame for frame in frames)


def now_stamp() -> float:
    return time.time()


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _quoted(text: str) -> bytes:
    """A str as a JSON string (json.dumps with these options builds an encoder per call)."""
    return _json_escape(text).encode()


# For the other protocols' framers (server/apis/): compact JSON, and a str as a JSON string.
compact_json = _dumps
quoted = _quoted


class ChunkFramer:
    """Frames of one `chat.completion.chunk` stream, byte-identical to the OpenAI shape:

    {"id":..,"object":"chat.completion.chunk","created":..,"model":..,"system_fingerprint":..,
     "choices":[{"index":0,"delta":{..},"logprobs":null,"finish_reason":..}]}
    plus `"usage":null` on every chunk when the client asked for a usage chunk (as OpenAI does).
    """

    __slots__ = ("_head", "_content_head", "_content_tail", "stamp", "_usage_null", "_pad",
                 "include_usage")
    heartbeat = PING
    failure_end: tuple[bytes, ...] = (DONE,)  # error_mode `inband`: the error, then [DONE]

    def __init__(self, completion_id: str, created: int, model: str, system_fingerprint: str,
                 include_usage: bool = False, stamp: bool = False, pad_bytes: int = 0) -> None:
        head = (b'{"id":' + _quoted(completion_id) + b',"object":"chat.completion.chunk","created":'
                + b"%d" % int(created) + b',"model":' + _quoted(model)
                + b',"system_fingerprint":' + _quoted(system_fingerprint) + b',"choices":')
        self._head = b"data: " + head
        self.include_usage = include_usage
        self._usage_null = b',"usage":null' if include_usage else b""
        self._content_head = self._head + b'[{"index":0,"delta":{"content":'
        # `pad_bytes`: a top-level field SDKs ignore, so an event (the role chunk, the first a
        # proxy sees, included) is as large as a scenario needs.
        self._pad = b',"pad":"' + b"x" * pad_bytes + b'"' if pad_bytes else b""
        self._content_tail = b'},"logprobs":null,"finish_reason":null}]' + self._usage_null + self._pad
        # Without stamps a frame is closed at once; with them seal() closes it at write time.
        self.stamp = stamp

    def _frame(self, body: bytes) -> bytes:
        return OpenFrame(body) if self.stamp else body + b"}\n\n"

    def content(self, text: str) -> bytes:
        """A content delta: the hot path, one per emitted piece of text."""
        if self.stamp:
            return OpenFrame(self._content_head + _json_escape(text).encode() + self._content_tail)
        return self._content_head + _json_escape(text).encode() + self._content_tail + b"}\n\n"

    def role(self) -> bytes:
        return self._frame(self._head + b'[{"index":0,"delta":{"role":"assistant","content":""},'
                           b'"logprobs":null,"finish_reason":null}]' + self._usage_null + self._pad)

    def finish(self, reason: str) -> bytes:
        return self._frame(self._head + b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":'
                           + _quoted(reason) + b"}]" + self._usage_null)

    def opening(self) -> list[bytes]:
        return [self.role()]

    def closing(self, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> list[bytes]:
        frames = [self.finish(finish_reason)]
        if self.include_usage:
            frames.append(self.usage(prompt_tokens, completion_tokens))
        frames.append(DONE)
        return frames

    def failure(self, fault: Any) -> list[bytes]:
        return [self.error(fault.error)]

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        return self._frame(self._head + b'[],"usage":' + _dumps(usage))

    def error(self, error: dict[str, Any]) -> bytes:
        """An in-band error after the first byte: `data: {"error": {...}}` (the OpenAI SDK raises
        APIError on it). Stamped like every data frame when stamps are on."""
        return self._frame(b'data: {"error":' + _dumps(error))


def completion_object(completion_id: str, created: int, model: str, system_fingerprint: str,
                      text: str, finish_reason: str, prompt_tokens: int,
                      completion_tokens: int) -> dict[str, Any]:
    """The non-streaming `chat.completion` object (sent as a plain JSON body, not SSE)."""
    return {
        "id": completion_id, "object": "chat.completion", "created": int(created), "model": model,
        "system_fingerprint": system_fingerprint,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
