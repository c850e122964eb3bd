"""Incremental Server-Sent Events parsing, and the classifier of OpenAI Chat Completions chunks.

The parser follows the WHATWG event-stream rules that browsers and the OpenAI SDKs apply:
lines end in CRLF, LF or CR; a blank line dispatches the event built from its `data:` lines;
a line starting with `:` is a comment (servers send `: ping` heartbeats that way); an event
that has not been closed by a blank line when the stream ends is discarded. That last rule
is why a proxy that holds back the final newline of each event (HAProxy compression) delays
every event by one: the client cannot dispatch what it has not seen end.
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

EventKind = Literal["role", "content", "finish", "usage", "error", "done", "comment", "other"]
# What a protocol's classifier says of one event: (kind, text, finish_reason, sent_at, extra).
Classified = tuple[EventKind, str, Optional[str], Optional[float], Any]

_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Feed it decoded body bytes as they arrive; it returns the complete items in each feed.

    Items are `("data", payload, event_name)` for a dispatched event and
    `("comment", text, None)` for each comment line (reported when its line ends, since a
    heartbeat is meant to be seen at once). Lines are decoded as UTF-8 with replacement:
    a newline byte never occurs inside a multi-byte sequence, so a complete line is always
    decodable on its own, and a U+FFFD in the result was in the bytes the server sent.
    """

    __slots__ = ("_tail", "_data", "_event", "_skip_lf", "_started")

    def __init__(self) -> None:
        self._tail = b""  # an incomplete line carried to the next feed
        self._data: list[bytes] = []
        self._event: bytes | None = None
        self._skip_lf = False  # the last feed ended in CR: a following LF belongs to it
        self._started = False

    def feed(self, chunk: bytes) -> list[tuple[str, str, str | None]]:
        if not self._started and chunk:
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            # Normalise CRLF and lone CR to LF. A CR at the very end may be half of a CRLF
            # split across reads: end the line now (do not wait) and drop the LF if it follows.
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._tail + chunk if self._tail else chunk
        if b"\n" not in buf:
            self._tail = buf
            return []
        lines = buf.split(b"\n")
        self._tail = lines.pop()
        out: list[tuple[str, str, str | None]] = []
        for line in lines:
            if not line:
                if self._data:
                    payload = b"\n".join(self._data).decode("utf-8", "replace")
                    name = self._event.decode("utf-8", "replace") if self._event else None
                    out.append(("data", payload, name))
                self._data = []
                self._event = None
            elif line[0] == 0x3A:  # ":" starts a comment line
                out.append(("comment", line[1:].strip().decode("utf-8", "replace"), None))
            else:
                field, colon, value = line.partition(b":")
                if colon and value[:1] == b" ":
                    value = value[1:]
                if field == b"data":
                    self._data.append(value)
                elif field == b"event":
                    self._event = value
                # `id:` and `retry:` only matter to a reconnecting EventSource: ignored.
        return out

    @property
    def pending(self) -> bool:
        """True when an event was started but never closed by a blank line."""
        return bool(self._data or self._tail)


def classify(payload: str, event_name: str | None = None) -> Classified:
    """Sort one Chat Completions `data:` payload into a kind: `(kind, text, finish_reason, sent_at,
    extra)`. The chat protocol's classifier (labs/client/apis/chat.py); its events are unnamed,
    so `event_name` is not read. The other protocols' are in labs/client/apis/.

    Follows choice index 0 (the lab sends n=1). `content` means a non-empty content delta
    (chat `delta.content` or completions `text`); a chunk that has content and a
    finish_reason counts as content and still reports the finish reason. A role-only or empty
    delta is `role` or `other`, never content (docs/metrics.md: they do not count for TTFT).
    `sent_at` is the server's wall-clock stamp when the request asked for `lab.stamp`.
    `extra` carries the usage object for `usage` chunks and the error object for `error`.
    """
    if payload == "[DONE]":
        return "done", "", None, None, None
    try:
        obj = json.loads(payload)
    except ValueError:
        return "other", payload[:200], None, None, None
    if not isinstance(obj, dict):
        return "other", payload[:200], None, None, None
    sent_at = obj.get("sent_at")
    if not isinstance(sent_at, (int, float)):
        sent_at = None
    if "error" in obj:
        err = obj["error"]
        message = err.get("message") if isinstance(err, dict) else None
        return "error", str(message if message is not None else err), None, sent_at, err
    choices = obj.get("choices")
    if choices and isinstance(choices, list) and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
        else:
            delta = {}
            content = choice.get("text")
        finish = choice.get("finish_reason")
        if isinstance(content, str) and content:
            return "content", content, finish, sent_at, None
        if finish:
            return "finish", "", finish, sent_at, None
        if delta.get("role"):
            return "role", "", None, sent_at, None
        return "other", "", None, sent_at, None
    if obj.get("usage"):
        return "usage", "", None, sent_at, obj["usage"]
    return "other", payload[:200], None, sent_at, None
