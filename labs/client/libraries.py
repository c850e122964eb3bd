"""Real client libraries as measured clients: what an app built on requests, httpx, aiohttp or the
OpenAI SDK sees, timed in the measuring process against the server's `sent_at` stamps.

    result = await measure_stream("requests-iter-lines", url, body)

A scenario picks one with the client option `library` (labs.scenario.runner.drive). Each runs the
library's own streaming loop in a thread (they are blocking APIs) and records every content
event the application code would get: `t` when the library handed it over, `hop_s` = that wall
time minus the server's stamp (ask for `lab.stamp`). `read` numbers the chunks the library's own
loop took from the HTTP layer below it (urllib3's `stream()` for requests, `iter_raw()` for
httpx; each SDK chunk for the OpenAI SDK), so events one chunk carried share a number.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from labs.client.results import Event, StreamResult
from labs.client.sse import SSEParser, classify
from server.apis.table import CHAT, MESSAGES

# One line each: what the application code does with the stream.
LIBRARIES: dict[str, str] = {
    "requests-iter-lines": "requests: `for line in response.iter_lines()` (chunk_size 512, its default)",
    "requests-chunk-1": "requests: `response.iter_lines(chunk_size=1)`",
    "httpx-iter-lines": "httpx: `with client.stream(...) as r: for line in r.iter_lines()`",
    "openai": "the OpenAI SDK: `for chunk in client.chat.completions.create(..., stream=True)`",
    "json-per-read": "httpx `iter_raw()`, each read decoded on its own and split into lines, each "
                     "`data:` line `json.loads`-ed at once (a line that fails is skipped)",
    "decode-per-read": "httpx `iter_raw()`, each read decoded on its own (errors='replace'), the "
                       "text buffered to the blank line, then parsed",
    "buffered-sse": "httpx `iter_raw()` into a parser that buffers bytes to the blank line and "
                    "decodes whole lines (labs/client/sse.py)",
    "aiohttp-lines": "aiohttp: `async for line in response.content` (a line longer than its read "
                     "buffer allows raises)",
    "aiohttp-events": "aiohttp: `async for chunk in response.content.iter_any()`, bytes buffered "
                      "to the blank line that ends an event",
    "anthropic": "the Anthropic SDK: `client.messages.create(..., stream=True)` on /v1/messages, "
                 "each text_delta as it is yielded (heartbeats counted from the same bytes)",
    "node-fetch": "Node's built-in `fetch`: `for await (const chunk of response.body)`, with an "
                  "undici Agent's `bodyTimeout` when `body_timeout_s` is set",
}
# The protocol a library speaks (server.apis.table.APIS), where it is not chat.
LIBRARY_APIS: dict[str, str] = {"anthropic": MESSAGES.name}
# Options a library takes besides `headers`: what the app would set on it.
LIBRARY_OPTIONS: dict[str, tuple[str, ...]] = {"node-fetch": ("body_timeout_s",)}
TIMEOUT_S = 60.0


class UnknownLibrary(ValueError):
    pass


def library_api(name: str) -> str:
    """The protocol client library `name` speaks: the path it is sent to and the body it gets."""
    return LIBRARY_APIS.get(name, CHAT.name)


def check_library(name: str, options: Mapping[str, Any] | None = None) -> str:
    if name not in LIBRARIES:
        raise UnknownLibrary(f"unknown client library {name!r}; known: {', '.join(LIBRARIES)}")
    unknown = sorted(set(options or {}) - set(LIBRARY_OPTIONS.get(name, ())))
    if unknown:
        takes = ", ".join(LIBRARY_OPTIONS.get(name, ())) or "no options"
        raise UnknownLibrary(f"client library {name!r} takes {takes} besides `headers`, not {unknown}")
    return name


class Recorder:
    """Builds the StreamResult of one library stream, event by event."""

    def __init__(self, url: str, library: str) -> None:
        self.result = StreamResult(url=url, mode=library)
        self.t0 = time.perf_counter()
        self.chunks = 0  # chunks the library took from the HTTP layer below it

    def counted(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """`chunks`, each counted as one read as it passes."""
        for chunk in chunks:
            self.chunks += 1
            yield chunk

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def response(self, status: int, headers: Mapping[str, str]) -> None:
        self.result.status = status
        self.result.headers = {k.lower(): v for k, v in headers.items()}
        self.result.content_encoding = self.result.headers.get("content-encoding")
        self.result.ttfb_s = self.now()

    def payload(self, payload: str, read: int | None = None) -> None:
        """One `data:` payload, as the application got it."""
        kind, text, finish, sent_at, _extra = classify(payload)
        self.add(kind, text, finish, sent_at, read)

    def add(self, kind: str, text: str, finish: str | None, sent_at: float | None,
            read: int | None = None) -> None:
        t, wall = self.now(), time.time()
        result = self.result
        result.events.append(Event(t=t, read=read or self.chunks, kind=kind, text=text,  # type: ignore[arg-type]
                                   hop_s=None if sent_at is None else wall - sent_at))
        if kind == "content":
            result.text += text
            if result.ttft_s is None:
                result.ttft_s = t
        if finish:
            result.finish_reason = finish
        if kind == "done":
            result.saw_done = True

    def parsed(self, parser: SSEParser, raw: bytes) -> None:
        """The events a correct SSE parser completes with the bytes `raw`, recorded now."""
        for item, payload, _name in parser.feed(raw):
            if item == "data":
                self.payload(payload)
            else:
                self.add("comment", payload, None, None)
                self.result.heartbeats += 1

    def finished(self, error: BaseException | None = None) -> StreamResult:
        result = self.result
        result.e2e_s = result.end_s = self.now()
        result.reads = self.chunks
        if error is not None:
            # An error from another runtime (Node's) says how it is shown and whether it is a timeout.
            result.error = getattr(error, "shown", None) or f"{type(error).__name__}: {error}"
            timeout = getattr(error, "is_timeout", "timeout" in type(error).__name__.lower())
            result.outcome = "timeout" if timeout else "truncated"
        elif result.status is not None and result.status >= 400:
            result.outcome = "http-error"
        else:
            result.outcome = "complete" if result.saw_done else "truncated"
            result.body_complete = True
        return result


def _data_lines(lines: Iterable[bytes | str], record: Recorder) -> None:
    for line in lines:
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        if text.startswith(":"):
            record.add("comment", text[1:].strip(), None, None)
            record.result.heartbeats += 1
        elif text.startswith("data:"):
            record.payload(text[5:].lstrip(" "))


def _requests(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder,
              chunk_size: int) -> None:
    import requests

    with requests.post(url, json=body, headers=dict(headers), stream=True, timeout=(10, TIMEOUT_S)) as response:
        record.response(response.status_code, response.headers)
        below = response.raw.stream  # what iter_content reads, chunk_size bytes at a time
        response.raw.stream = lambda *a, **k: record.counted(below(*a, **k))
        _data_lines(response.iter_lines(chunk_size=chunk_size), record)


def _httpx_raw(url: str, body: Mapping[str, Any], headers: Mapping[str, str],
               record: Recorder) -> Iterator[bytes]:
    import httpx

    with httpx.Client(timeout=httpx.Timeout(10, read=TIMEOUT_S)) as client:
        with client.stream("POST", url, json=body, headers=dict(headers)) as response:
            record.response(response.status_code, response.headers)
            yield from record.counted(response.iter_raw())


def _httpx_lines(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder) -> None:
    import httpx

    with httpx.Client(timeout=httpx.Timeout(10, read=TIMEOUT_S)) as client:
        with client.stream("POST", url, json=body, headers=dict(headers)) as response:
            record.response(response.status_code, response.headers)
            below = response.iter_raw  # what iter_bytes, iter_text and iter_lines read
            response.iter_raw = lambda *a, **k: record.counted(below(*a, **k))  # type: ignore[method-assign]
            _data_lines(response.iter_lines(), record)


def _json_per_read(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder) -> None:
    """The bug as it is written: one read holds whole events of whole characters."""
    for raw in _httpx_raw(url, body, headers, record):
        for line in raw.decode("utf-8", "replace").split("\n"):
            if line.startswith("data: "):
                try:
                    json.loads(line[6:]) if line[6:] != "[DONE]" else None
                except ValueError:
                    continue  # "a bad chunk": the app skips it, and the event is gone
                record.payload(line[6:])


def _decode_per_read(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder) -> None:
    """Events are buffered to the blank line, but as text: each read was decoded on its own, so
    a character whose bytes two reads share becomes U+FFFD (or two)."""
    pending = ""
    for raw in _httpx_raw(url, body, headers, record):
        pending += raw.decode("utf-8", "replace")
        *events, pending = pending.split("\n\n")
        for event in events:
            for line in event.split("\n"):
                if line.startswith("data: "):
                    record.payload(line[6:])


def _buffered(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder) -> None:
    parser = SSEParser()
    for raw in _httpx_raw(url, body, headers, record):
        record.parsed(parser, raw)


def _openai(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder) -> None:
    from openai import OpenAI

    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path.rsplit("/chat/completions", 1)[0], "", ""))
    client = OpenAI(base_url=base, api_key="streamlab", max_retries=0, timeout=TIMEOUT_S,
                    default_headers=dict(headers))
    known = {"model", "messages", "stream", "max_tokens", "stop", "temperature"}
    extra = {k: v for k, v in body.items() if k not in known}
    with client.chat.completions.with_streaming_response.create(
            model=body["model"], messages=body["messages"], stream=True,
            max_tokens=body.get("max_tokens"), extra_body=extra,
            extra_query=dict(parse_qsl(parts.query)) or None) as response:
        record.response(response.http_response.status_code, response.http_response.headers)
        for chunk in response.parse():
            record.chunks += 1
            choice = chunk.choices[0] if chunk.choices else None
            text = (choice.delta.content or "") if choice else ""
            sent_at = (chunk.model_extra or {}).get("sent_at")
            kind = "content" if text else ("finish" if choice and choice.finish_reason else "other")
            record.add(kind, text, choice.finish_reason if choice else None, sent_at)
    record.result.saw_done = True  # the SDK ends its iteration at [DONE] and hides it


def _aiohttp(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder,
             by_lines: bool) -> None:
    """aiohttp's own loop, in this worker thread's event loop; each line (or chunk) it hands over
    counts as one read, and its bytes in `body_bytes`."""
    import aiohttp

    async def stream() -> None:
        timeout = aiohttp.ClientTimeout(sock_connect=10, sock_read=TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(url, json=body, headers=dict(headers)) as response:
                record.response(response.status, response.headers)
                if by_lines:
                    async for line in response.content:
                        record.chunks += 1
                        record.result.body_bytes += len(line)
                        _data_lines([line.rstrip(b"\r\n")], record)
                    return
                pending = b""
                async for chunk in response.content.iter_any():
                    record.chunks += 1
                    record.result.body_bytes += len(chunk)
                    *events, pending = (pending + chunk).split(b"\n\n")
                    _data_lines([line for event in events for line in event.split(b"\n")], record)
    asyncio.run(stream())


def _node_fetch(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder,
                body_timeout_s: float | None = None) -> None:
    from labs.client import node_fetch

    node_fetch.stream(url, body, headers, record, body_timeout_s)


def _anthropic(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Recorder) -> None:
    from labs.client import anthropic_sdk

    anthropic_sdk.stream(url, body, headers, record, TIMEOUT_S)


CLIENTS: dict[str, Callable[..., None]] = {
    "requests-iter-lines": lambda u, b, h, r: _requests(u, b, h, r, 512),
    "requests-chunk-1": lambda u, b, h, r: _requests(u, b, h, r, 1),
    "httpx-iter-lines": _httpx_lines,
    "openai": _openai,
    "json-per-read": _json_per_read,
    "decode-per-read": _decode_per_read,
    "buffered-sse": _buffered,
    "aiohttp-lines": lambda u, b, h, r: _aiohttp(u, b, h, r, by_lines=True),
    "aiohttp-events": lambda u, b, h, r: _aiohttp(u, b, h, r, by_lines=False),
    "anthropic": _anthropic,
    "node-fetch": _node_fetch,
}


def measure_sync(library: str, url: str, body: Mapping[str, Any],
                 headers: Mapping[str, str] | None = None, **options: Any) -> StreamResult:
    record = Recorder(url, check_library(library, options))
    try:
        CLIENTS[library](url, body, headers or {}, record, **options)
    except Exception as exc:  # noqa: BLE001 - the library's error is the measurement
        return record.finished(exc)
    return record.finished()


async def measure_stream(library: str, url: str, body: Mapping[str, Any],
                         headers: Mapping[str, str] | None = None, **options: Any) -> StreamResult:
    """One stream through `library`, in a worker thread (the event loop stays free)."""
    return await asyncio.to_thread(measure_sync, library, url, body, headers, **options)
