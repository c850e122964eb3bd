"""The official Anthropic Python SDK as a measured client: `client.messages.create(..., stream=True)`
and its events, as an app (or a Python coding agent) on Anthropic Messages gets them.

The SDK hides what a relay does to the stream (it skips pings and events without a name, and
never shows comments), so its HTTP client's transport also reads the same bytes into the lab's
SSE parser: the heartbeats that reached the client are counted from the wire, the content from
the SDK. `record` is labs.client.libraries' Recorder (which imports this module). `url` is the
Messages URL (`.../v1/messages`), `body` a Messages request (labs.client.apis.messages).
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Mapping

from labs.client.sse import SSEParser
from server.apis.table import MESSAGES

# The fields of a lab request body the Messages API has under the same name; the rest (`lab`, ...)
# go as extra body fields, as an app passes a gateway's own fields.
MESSAGES_FIELDS = ("model", "messages", "max_tokens", "stop_sequences", "temperature")
ANTHROPIC_VERSION = "2023-06-01"  # what the SDK sends; the docs' only version


def _teed(parser: SSEParser, record: Any, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """`chunks`, each one read by the lab's parser as it passes: heartbeats (`: ping` comments and
    `event: ping`) counted, reads numbered."""
    for chunk in chunks:
        record.chunks += 1
        record.result.body_bytes += len(chunk)
        for item, _payload, name in parser.feed(chunk):
            if item != "data" or name == "ping":
                record.result.heartbeats += 1
        yield chunk


def stream(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Any,
           timeout_s: float) -> None:
    import anthropic
    import httpx2

    parser = SSEParser()

    class TeedStream(httpx2.SyncByteStream):
        """The response's byte stream, each chunk read by the lab's parser as it passes."""

        def __init__(self, below: Any) -> None:
            self._below = below

        def __iter__(self) -> Iterator[bytes]:
            return _teed(parser, record, iter(self._below))

        def close(self) -> None:
            self._below.close()

    class TeeTransport(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            response = super().handle_request(request)
            response.stream = TeedStream(response.stream)
            return response

    sent = {k: v for k, v in headers.items() if k.lower() != "x-api-key"}
    key = next((v for k, v in headers.items() if k.lower() == "x-api-key"), "streamlab")
    base = url.rsplit(MESSAGES.path, 1)[0]  # the SDK adds the path itself
    client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=timeout_s,
                                 default_headers=sent,
                                 http_client=httpx2.Client(transport=TeeTransport(), timeout=timeout_s))
    known = {k: body[k] for k in MESSAGES_FIELDS if k in body}
    extra = {k: v for k, v in body.items() if k not in MESSAGES_FIELDS and k != "stream"}
    # Time from the request, not from the SDK's import (2-3 s on a busy machine, the first time).
    record.t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        try:
            opened = stack.enter_context(
                client.messages.with_streaming_response.create(**known, stream=True, extra_body=extra))
        except anthropic.APIStatusError as refused:
            # A status >= 400 is raised before any event: the status is the measurement.
            record.response(refused.status_code, refused.response.headers)
            record.result.error = f"{type(refused).__name__}: {refused}"
            return
        record.response(opened.http_response.status_code, opened.http_response.headers)
        for event in opened.parse():
            if event.type == "content_block_delta" and getattr(event.delta, "type", "") == "text_delta":
                record.add("content", event.delta.text, None, None)
            elif event.type == "message_delta":
                record.add("finish", "", event.delta.stop_reason, None)
            elif event.type == "message_stop":
                record.add("done", "", None, None)
            else:
                record.add("other", "", None, None)

