"""What the settings of an Envoy config suggest, one `Rule` per finding kind and setting
(labs/verify/rules.py says how); the first rule of each kind is the fix for a measured fault no
setting explains."""
from __future__ import annotations

from typing import Any, Callable

from labs.verify import regex as foreign
from labs.verify.model import Options, Reading
from labs.verify.rules import SSE, Rule, Suspect, timeout_fix


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


def _first_filter(r: Reading, holds: Callable[[Any], bool]) -> Any:
    return next((item for item in r.get("http_filters").value if holds(item)), None)


def _deadline(name: str, fix: Callable[[str, Reading], str]) -> Callable[[Reading, Options], Suspect | None]:
    """A whole-response deadline (the route's timeout, a stream-duration cap) below --max-stream."""
    def suspect(r: Reading, o: Options) -> Suspect | None:
        limit = r.settings.get(name)
        if limit is None or not limit.value or limit.value >= o.max_stream_s:
            return None
        key = limit.text.split(":")[0]
        return Suspect(f"{limit.text}: every response is cut {limit.value:g} s after the request "
                       f"(--max-stream is {o.max_stream_s:g} s)", fix(key, r), limit.value, limit.where)
    return suspect


def _idle(r: Reading, o: Options) -> Suspect | None:
    limit = r.settings.get("idle timeout")  # the route's idle_timeout, else stream_idle_timeout
    if limit is None or not limit.value or limit.value >= o.max_silence_s:
        return None
    key = limit.text.split(":")[0]
    return Suspect(f"{limit.text}: a silence longer than {limit.value:g} s ends the stream "
                   f"(--max-silence is {o.max_silence_s:g} s)",
                   f"{key}: {timeout_fix(limit.value, o)}s (and `: ping` heartbeats)", limit.value, limit.where)


def _lua_reads_body(r: Reading, o: Options) -> Suspect | None:
    item = _first_filter(r, lambda f: "lua" in str(f.get("name", "")) and ":body(" in str(f)
                         and "envoy_on_response" in str(f))
    if item is None:
        return None
    return Suspect(f"the Lua filter {item.get('name')} reads the whole response body: Envoy buffers the stream "
                   "until it ends", "skip body() for Content-Type text/event-stream")


def _ext_proc_buffers(r: Reading, o: Options) -> Suspect | None:
    item = _first_filter(r, lambda f: _ext_proc_response_mode(f) in ("BUFFERED", "BUFFERED_PARTIAL"))
    if item is None:
        return None
    return Suspect(f"{item.get('name')} asks for the response body {_ext_proc_response_mode(item)} "
                   "(processing_mode.response_body_mode): Envoy holds the stream for the processor",
                   "response_body_mode: STREAMED (or NONE) for text/event-stream")


def _compressor(r: Reading, o: Options) -> Suspect | None:
    item = _first_filter(r, lambda f: "compressor" in str(f.get("name", "")) and _compresses_sse(f))
    if item is None:
        return None
    return Suspect(f"the compressor {item.get('name')} compresses {SSE}",
                   f"in the compressor of {r.scope}: content_type without {SSE}; or, from the server, "
                   "`Cache-Control: no-transform` on the stream (measured on Envoy 1.40: the compressor then "
                   "passes it through)")


def _breakers(r: Reading, o: Options) -> Suspect | None:
    requests, pending, connections = (r.value(k) for k in ("max_requests", "max_pending_requests", "max_connections"))
    capacity = min(requests, connections + pending)
    if capacity >= o.streams:
        return None
    where = r.get("max_requests" if requests <= connections + pending else "max_pending_requests").where
    return Suspect(f"circuit breakers max_requests {requests}, max_connections {connections}, "
                   f"max_pending_requests {pending}: about {capacity} streams at once, the rest get 503 "
                   f"(--streams is {o.streams})",
                   f"max_requests / max_pending_requests / max_connections: {max(4096, o.streams * 4)}",
                   where=where)


RULES: tuple[Rule, ...] = (
    Rule("total-timeout", "route timeout", "timeout: 0s on the streaming route", ("long-stream",),
         _deadline("route timeout", lambda key, r: f"on {r.scope}: {key}: 0s; a whole-response deadline cuts a "
                   "long answer whatever its heartbeats, so bound silences with idle_timeout instead")),
    Rule("total-timeout", "stream duration", "max_stream_duration: 0s on the streaming route", ("long-stream",),
         _deadline("stream duration", lambda key, r: f"on {r.scope}: {key}: 0s")),
    Rule("idle-timeout", "stream_idle_timeout", "stream_idle_timeout above the longest silence",
         ("silence-before-first-token", "silence-mid-stream"), _idle),
    Rule("buffering", "http_filters", "no filter that needs the whole response body", ("streaming",),
         _lua_reads_body),
    Rule("buffering", "http_filters", "no filter that needs the whole response body", ("streaming",),
         _ext_proc_buffers),
    Rule("compression-delay", "http_filters", "compressor content_type without text/event-stream", ("gzip",),
         _compressor),
    Rule("connection-limit", "max_requests", "circuit-breaker thresholds above the concurrent streams",
         ("concurrent-streams",), _breakers),
    # What the reading alone cannot tell: the measurement shows it.
    Rule("coalescing", "http_filters", "no filter that holds response data"),
    Rule("disconnect-not-propagated", "http_filters", "no filter that holds the upstream request"),
)
