"""What the settings in effect suggest, compared with the catalogue: one `Suspicion` per fault.

Each rule names the directive behind the fault (its `where`), the fix as the directive to write,
and the dynamic check that can show it. A suspicion the measurement confirms becomes a `failure`;
one it does not confirm stays a `warning`, with the reason.
"""
from __future__ import annotations

import math
import os
import re
from labs.verify.model import Options, Reading, Suspicion

SSE = "text/event-stream"


def suspicions(reading: Reading, options: Options) -> list[Suspicion]:
    return {"nginx": _nginx, "haproxy": _haproxy, "envoy": _envoy}[reading.proxy](reading, options)


def _timeout_fix(limit: float, options: Options) -> int:
    """An idle limit with room (x1.5, in tens of seconds) above the longest silence expected."""
    return int(math.ceil(max(limit, options.max_silence_s) * 1.5 / 10) * 10)


def _nginx(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    buffering, version = r.get("proxy_buffering"), r.get("proxy_http_version")
    if buffering.value == "on":
        upstream = ('; proxy_http_version 1.1; proxy_set_header Connection ""'
                    if version.value == "1.0" else "")
        found.append(Suspicion(
            "buffering", buffering.where,
            f"{buffering.text}: nginx holds the reply in its buffers unless the server sends "
            "`X-Accel-Buffering: no`" + (f"; with {version.text} the reply is close-delimited and "
                                          "events wait for a full buffer or the end" if version.value == "1.0" else ""),
            f"proxy_buffering off{upstream};", ("streaming",)))
    cache = r.get("proxy_cache")
    if cache.value != "off":
        found.append(Suspicion("buffering", cache.where, f"{cache.text}: a cached response is buffered whole",
                               "proxy_cache off; (in the streaming location)", ("streaming",)))
    gzip, types = r.get("gzip"), r.get("gzip_types")
    if gzip.value == "on" and (SSE in types.value.split() or "*" in types.value.split()):
        kept = [t for t in types.value.split() if t not in (SSE, "*")] or ["application/json"]
        found.append(Suspicion("compression-delay", types.where,
                               f"{gzip.text} with {types.text}: the gzip filter collects events until its "
                               "buffer fills", f"gzip_types {' '.join(kept)};", ("gzip",)))
    read_timeout = r.get("proxy_read_timeout")
    limit = _nginx_time(read_timeout.value)
    if limit < o.max_silence_s:
        found.append(Suspicion("idle-timeout", read_timeout.where,
                               f"{read_timeout.text}: a silence longer than {limit:g} s ends the stream "
                               f"(--max-silence is {o.max_silence_s:g} s)",
                               f"proxy_read_timeout {_timeout_fix(limit, o)}s; (and `: ping` heartbeats)",
                               ("silence-before-first-token", "silence-mid-stream"), limit))
    abort = r.get("proxy_ignore_client_abort")
    if abort.value == "on":
        found.append(Suspicion("disconnect-not-propagated", abort.where,
                               f"{abort.text}: nginx keeps the upstream request when the client leaves",
                               "proxy_ignore_client_abort off;", ("disconnect",)))
    workers, connections = r.get("worker_processes"), r.get("worker_connections")
    count = (os.cpu_count() or 1) if workers.value == "auto" else int(workers.value)
    capacity = count * int(connections.value) // 2
    if capacity < o.streams:
        needed = max(1024, 2 * o.streams * 2)
        found.append(Suspicion("connection-limit", connections.where,
                               f"{workers.text} x {connections.text} / 2 connections per stream: about "
                               f"{capacity} streams at once (--streams is {o.streams})",
                               f"worker_connections {needed}; worker_rlimit_nofile {needed * 2};",
                               ("concurrent-streams",)))
    limit_conn = r.get("limit_conn")
    if limit_conn.value:
        found.append(Suspicion("connection-limit", limit_conn.where,
                               f"{limit_conn.text}: streams beyond the limit get 503", "raise or remove limit_conn "
                               "for the streaming location", ("concurrent-streams",)))
    return found


def _nginx_time(text: str) -> float:
    from labs.verify.nginx.read import parse_time
    return parse_time(text)


def _haproxy(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    nodelay = r.get("option http-no-delay")
    if not nodelay.value:
        found.append(Suspicion("coalescing", nodelay.where,
                               f"{nodelay.text}: HAProxy sends with MSG_MORE and the kernel holds small "
                               "writes for up to ~200 ms", "option http-no-delay", ("streaming",)))
    algo, types = r.get("compression algo"), r.get("compression type")
    if algo.value and (types.value is None or SSE in types.value):
        kept = [t for t in (types.value or []) if t != SSE] or ["application/json", "text/plain"]
        found.append(Suspicion("compression-delay", types.where if types.value else algo.where,
                               f"{algo.text} with {types.text}: the deflate stream keeps each event's last "
                               "bytes until the next one", f"compression type {' '.join(kept)}", ("gzip",)))
    server = r.get("timeout server")
    if server.value is not None and server.value < o.max_silence_s:
        found.append(Suspicion("idle-timeout", server.where,
                               f"{server.text}: a silence longer than {server.value:g} s ends the stream "
                               f"(--max-silence is {o.max_silence_s:g} s)",
                               f"timeout server {_timeout_fix(server.value, o)}s (and `: ping` heartbeats)",
                               ("silence-before-first-token", "silence-mid-stream"), server.value))
    abort = r.get("option abortonclose")
    if not abort.value:
        found.append(Suspicion("disconnect-not-propagated", abort.where,
                               f"{abort.text}: the server side stays open after the client leaves, until "
                               "HAProxy next writes to the client", "option abortonclose", ("disconnect",)))
    for name in ("global maxconn", "frontend maxconn", "server maxconn"):
        limit = r.settings.get(name)
        if limit is not None and limit.value is not None and limit.value < o.streams:
            found.append(Suspicion("connection-limit", limit.where,
                                   f"{limit.text}: streams beyond {limit.value} wait for one to end "
                                   f"(--streams is {o.streams})",
                                   f"maxconn {max(4096, o.streams * 4)} ({name.split()[0]})",
                                   ("concurrent-streams",)))
    return found


def _compresses_sse(compressor: dict) -> bool:
    """Envoy's default content types leave text/event-stream out; a list or a regex may add it."""
    common = (compressor.get("typed_config", {}).get("response_direction_config", {}) or {}).get("common_config", {})
    types = common.get("content_type") or []
    regex = ((common.get("content_type_matcher") or {}).get("safe_regex") or {}).get("regex")
    if regex:
        return re.fullmatch(regex, SSE) is not None
    return SSE in types


def _envoy(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    for name in ("route timeout", "max_stream_duration", "route max_stream_duration"):
        limit = r.settings.get(name)
        if limit is not None and limit.value and limit.value < o.max_stream_s:
            key = limit.text.split(":")[0]
            found.append(Suspicion("total-timeout", limit.where,
                                   f"{limit.text}: every response is cut {limit.value:g} s after the request "
                                   f"(--max-stream is {o.max_stream_s:g} s)",
                                   f"{key}: 0s (and bound silences with idle_timeout)" if name == "route timeout"
                                   else f"{key}: 0s", ("long-stream",), limit.value))
    for name in ("stream_idle_timeout", "route idle_timeout"):
        limit = r.settings.get(name)
        if limit is not None and limit.value and limit.value < o.max_silence_s:
            found.append(Suspicion("idle-timeout", limit.where,
                                   f"{limit.text}: a silence longer than {limit.value:g} s ends the stream "
                                   f"(--max-silence is {o.max_silence_s:g} s)",
                                   f"{name.split()[-1]}: {_timeout_fix(limit.value, o)}s (and `: ping` heartbeats)",
                                   ("silence-before-first-token", "silence-mid-stream"), limit.value))
    filters = r.get("http_filters")
    for item in filters.value:
        source = str(item)
        if "lua" in str(item.get("name", "")) and ":body(" in source and "envoy_on_response" in source:
            found.append(Suspicion("buffering", filters.where,
                                   f"the Lua filter {item.get('name')} reads the whole response body: Envoy "
                                   "buffers the stream until it ends",
                                   "skip body() for Content-Type text/event-stream", ("streaming",)))
        if "ext_proc" in str(item.get("name", "")) and "BUFFERED" in source:
            found.append(Suspicion("buffering", filters.where,
                                   f"{item.get('name')} asks for the response body BUFFERED",
                                   "response_body_mode: STREAMED (or NONE) for text/event-stream", ("streaming",)))
        if "compressor" in str(item.get("name", "")) and _compresses_sse(item):
            found.append(Suspicion("compression-delay", filters.where,
                                   f"the compressor {item.get('name')} compresses {SSE}",
                                   "content_type without text/event-stream", ("gzip",)))
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
