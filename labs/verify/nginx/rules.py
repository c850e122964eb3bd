"""What the settings of an nginx config suggest: one `Rule` per (finding kind, setting), in the order
labs/verify/rules.py reads them (the first rule of a kind gives the fix for a measured fault no
setting explains)."""
from __future__ import annotations

import os

from labs.verify.model import Options, Reading
from labs.verify.nginx.settings import parse_time
from labs.verify.rules import SSE, Rule, Suspect, timeout_fix


def _buffering(r: Reading, o: Options) -> Suspect | None:
    buffering, version = r.get("proxy_buffering"), r.get("proxy_http_version")
    if buffering.value != "on":
        return None
    close_delimited = version.value == "1.0"
    upstream = '; proxy_http_version 1.1; proxy_set_header Connection ""' if close_delimited else ""
    return Suspect(
        f"{buffering.text}: nginx holds the reply in its buffers unless the server sends "
        "`X-Accel-Buffering: no`" + (f"; with {version.text} the reply is close-delimited and "
                                      "events wait for a full buffer or the end" if close_delimited else ""),
        f"in {r.scope} (the streaming route only, not the whole server): proxy_buffering off{upstream}; "
        "or, from the server, the response header `X-Accel-Buffering: no` (nginx then streams that "
        "response alone). Cost: unbuffered, a slow client holds the upstream connection (and its "
        "model slot) as long as it reads slowly, which is why linters such as Gixy-Next flag "
        "`proxy_buffering off`; send_timeout (60 s) still drops a client that reads nothing, and "
        "limit_conn bounds how many one client holds")


def _cache(r: Reading, o: Options) -> Suspect | None:
    cache = r.get("proxy_cache")
    if cache.value == "off":
        return None
    return Suspect(f"{cache.text}: a cached response is buffered whole", "proxy_cache off; (in the streaming location)")


def _gzip(r: Reading, o: Options) -> Suspect | None:
    gzip, types = r.get("gzip"), r.get("gzip_types")
    listed = types.value.split()
    if gzip.value != "on" or not (SSE in listed or "*" in listed):
        return None
    kept = [t for t in listed if t not in (SSE, "*")] or ["application/json"]
    return Suspect(f"{gzip.text} with {types.text}: the gzip filter collects events until its buffer fills",
                   f"gzip_types {' '.join(kept)}; (or `gzip off;` in {r.scope}); the server cannot opt out: "
                   "nginx's gzip filter reads gzip_types, gzip_proxied and the length, not "
                   "`Cache-Control: no-transform`, so the fix is the proxy's")


def _read_timeout(r: Reading, o: Options) -> Suspect | None:
    read_timeout = r.get("proxy_read_timeout")
    limit = parse_time(read_timeout.value)
    if limit >= o.max_silence_s:
        return None
    return Suspect(f"{read_timeout.text}: a silence longer than {limit:g} s ends the stream "
                   f"(--max-silence is {o.max_silence_s:g} s)",
                   f"in {r.scope}: proxy_read_timeout {timeout_fix(limit, o)}s; and `: ping` heartbeats from "
                   "the server, which keep any idle limit on the path from firing (the cost of a long "
                   "timeout: a dead upstream is noticed that late)", limit)


def _client_abort(r: Reading, o: Options) -> Suspect | None:
    abort = r.get("proxy_ignore_client_abort")
    if abort.value != "on":
        return None
    return Suspect(f"{abort.text}: nginx keeps the upstream request when the client leaves",
                   f"in {r.scope}: proxy_ignore_client_abort off;")


def _worker_connections(r: Reading, o: Options) -> Suspect | None:
    workers, connections = r.get("worker_processes"), r.get("worker_connections")
    count = (os.cpu_count() or 1) if workers.value == "auto" else int(workers.value)
    capacity = count * int(connections.value) // 2  # two connections per stream: the client's, the upstream's
    if capacity >= o.streams:
        return None
    needed = max(1024, 2 * o.streams * 2)
    return Suspect(f"{workers.text} x {connections.text} / 2 connections per stream: about {capacity} streams "
                   f"at once (--streams is {o.streams})",
                   f"worker_connections {needed}; worker_rlimit_nofile {needed * 2};")


def _limit_conn(r: Reading, o: Options) -> Suspect | None:
    limit_conn = r.get("limit_conn")
    # `limit_conn ZONE N`: a limit per key (a client address, mostly) at or above --streams leaves
    # the streams through (proxies/fixed/nginx.conf bounds one address's slow uploads with one).
    allowed = limit_conn.value.split()[-1] if limit_conn.value else ""
    if not limit_conn.value or (allowed.isdigit() and int(allowed) >= o.streams):
        return None
    return Suspect(f"{limit_conn.text}: streams beyond the limit are refused (503, or limit_conn_status) "
                   f"(--streams is {o.streams})",
                   f"limit_conn above the concurrent streams (at least {o.streams}), or none for the "
                   "streaming location")


RULES: tuple[Rule, ...] = (
    Rule("buffering", "proxy_buffering", 'proxy_buffering off; proxy_http_version 1.1; proxy_set_header Connection "";',
         ("streaming",), _buffering),
    Rule("buffering", "proxy_cache", "proxy_cache off; (in the streaming location)", ("streaming",), _cache),
    Rule("coalescing", "proxy_buffering", "proxy_buffering off;"),
    Rule("compression-delay", "gzip_types", "gzip_types without text/event-stream", ("gzip",), _gzip),
    Rule("idle-timeout", "proxy_read_timeout", "proxy_read_timeout above the longest silence",
         ("silence-before-first-token", "silence-mid-stream"), _read_timeout),
    Rule("total-timeout", "proxy_read_timeout", "no limit on the whole response for the streaming location"),
    Rule("disconnect-not-propagated", "proxy_ignore_client_abort", "proxy_ignore_client_abort off;",
         ("disconnect",), _client_abort),
    Rule("connection-limit", "worker_connections", "worker_connections above twice the concurrent streams",
         ("concurrent-streams",), _worker_connections),
    Rule("connection-limit", "limit_conn", "limit_conn above the concurrent streams, or none for the streaming "
         "location", ("concurrent-streams",), _limit_conn),
)
