"""What the settings of an Envoy config suggest: one `Suspicion` per fault (labs/verify/rules.py says how)."""
from __future__ import annotations

import re

from labs.verify import regex as foreign

from labs.verify.model import Options, Reading, Suspicion
from labs.verify.rules import SSE, timeout_fix


def _compresses_sse(compressor: dict) -> bool:
    """Envoy's default content types leave text/event-stream out; a list or a regex may add it."""
    common = (compressor.get("typed_config", {}).get("response_direction_config", {}) or {}).get("common_config", {})
    types = common.get("content_type") or []
    regex = ((common.get("content_type_matcher") or {}).get("safe_regex") or {}).get("regex")
    if regex:
        return foreign.fullmatch(regex, SSE)
    return SSE in types


def _ext_proc_response_mode(item: dict) -> str | None:
    config = item.get("typed_config") or {}
    if "ext_proc" not in str(item.get("name", "")) + str(config.get("@type", "")):
        return None
    return str((config.get("processing_mode") or {}).get("response_body_mode", "NONE"))


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    for name in ("route timeout", "stream duration"):
        limit = r.settings.get(name)
        if limit is not None and limit.value and limit.value < o.max_stream_s:
            key = limit.text.split(":")[0]
            found.append(Suspicion("total-timeout", limit.where,
                                   f"{limit.text}: every response is cut {limit.value:g} s after the request "
                                   f"(--max-stream is {o.max_stream_s:g} s)",
                                   f"on {r.scope}: {key}: 0s; a whole-response deadline cuts a long answer whatever "
                                   "its heartbeats, so bound silences with idle_timeout instead"
                                   if name == "route timeout" else f"on {r.scope}: {key}: 0s", ("long-stream",),
                                   limit.value))
    limit = r.settings.get("idle timeout")  # the route's idle_timeout, else stream_idle_timeout
    if limit is not None and limit.value and limit.value < o.max_silence_s:
        key = limit.text.split(":")[0]
        found.append(Suspicion("idle-timeout", limit.where,
                               f"{limit.text}: a silence longer than {limit.value:g} s ends the stream "
                               f"(--max-silence is {o.max_silence_s:g} s)",
                               f"{key}: {timeout_fix(limit.value, o)}s (and `: ping` heartbeats)",
                               ("silence-before-first-token", "silence-mid-stream"), limit.value))
    filters = r.get("http_filters")
    for item in filters.value:
        source = str(item)
        if "lua" in str(item.get("name", "")) and ":body(" in source and "envoy_on_response" in source:
            found.append(Suspicion("buffering", filters.where,
                                   f"the Lua filter {item.get('name')} reads the whole response body: Envoy "
                                   "buffers the stream until it ends",
                                   "skip body() for Content-Type text/event-stream", ("streaming",)))
        mode = _ext_proc_response_mode(item)
        if mode in ("BUFFERED", "BUFFERED_PARTIAL"):
            found.append(Suspicion("buffering", filters.where,
                                   f"{item.get('name')} asks for the response body {mode} (processing_mode."
                                   "response_body_mode): Envoy holds the stream for the processor",
                                   "response_body_mode: STREAMED (or NONE) for text/event-stream", ("streaming",)))
        if "compressor" in str(item.get("name", "")) and _compresses_sse(item):
            found.append(Suspicion("compression-delay", filters.where,
                                   f"the compressor {item.get('name')} compresses {SSE}",
                                   f"in the compressor of {r.scope}: content_type without {SSE}; or, from the "
                                   "server, `Cache-Control: no-transform` on the stream (measured on Envoy "
                                   "1.40: the compressor then passes it through)", ("gzip",)))
    requests, pending, connections = (r.value(k) for k in ("max_requests", "max_pending_requests", "max_connections"))
    capacity = min(requests, connections + pending)
    if capacity < o.streams:
        where = r.get("max_requests" if requests <= connections + pending else "max_pending_requests").where
        found.append(Suspicion("connection-limit", where,
                               f"circuit breakers max_requests {requests}, max_connections {connections}, "
                               f"max_pending_requests {pending}: about {capacity} streams at once, the rest "
                               f"get 503 (--streams is {o.streams})",
                               f"max_requests / max_pending_requests / max_connections: {max(4096, o.streams * 4)}",
                               ("concurrent-streams",)))
    return found
