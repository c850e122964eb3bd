"""What the settings of nginx config suggest: one `Suspicion` per fault (labs/verify/rules.py says how)."""
from __future__ import annotations

import os

from labs.verify.model import Options, Reading, Suspicion
from labs.verify.nginx.read import parse_time
from labs.verify.rules import SSE, timeout_fix


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
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
            f"in {r.scope} (the streaming route only, not the whole server): proxy_buffering off{upstream}; "
            "or, from the server, the response header `X-Accel-Buffering: no` (nginx then streams that "
            "response alone). Cost: unbuffered, a slow client holds the upstream connection (and its "
            "model slot) as long as it reads slowly, which is why linters such as Gixy-Next flag "
            "`proxy_buffering off`; send_timeout (60 s) still drops a client that reads nothing, and "
            "limit_conn bounds how many one client holds", ("streaming",)))
    cache = r.get("proxy_cache")
    if cache.value != "off":
        found.append(Suspicion("buffering", cache.where, f"{cache.text}: a cached response is buffered whole",
                               "proxy_cache off; (in the streaming location)", ("streaming",)))
    gzip, types = r.get("gzip"), r.get("gzip_types")
    if gzip.value == "on" and (SSE in types.value.split() or "*" in types.value.split()):
        kept = [t for t in types.value.split() if t not in (SSE, "*")] or ["application/json"]
        found.append(Suspicion("compression-delay", types.where,
                               f"{gzip.text} with {types.text}: the gzip filter collects events until its "
                               "buffer fills", f"gzip_types {' '.join(kept)}; (or `gzip off;` in {r.scope}); the "
                               "server cannot opt out: nginx's gzip filter reads gzip_types, gzip_proxied and "
                               "the length, not `Cache-Control: no-transform`, so the fix is the proxy's", ("gzip",)))
    read_timeout = r.get("proxy_read_timeout")
    limit = parse_time(read_timeout.value)
    if limit < o.max_silence_s:
        found.append(Suspicion("idle-timeout", read_timeout.where,
                               f"{read_timeout.text}: a silence longer than {limit:g} s ends the stream "
                               f"(--max-silence is {o.max_silence_s:g} s)",
                               f"in {r.scope}: proxy_read_timeout {timeout_fix(limit, o)}s; and `: ping` "
                               "heartbeats from the server, which keep any idle limit on the path from "
                               "firing (the cost of a long timeout: a dead upstream is noticed that late)",
                               ("silence-before-first-token", "silence-mid-stream"), limit))
    abort = r.get("proxy_ignore_client_abort")
    if abort.value == "on":
        found.append(Suspicion("disconnect-not-propagated", abort.where,
                               f"{abort.text}: nginx keeps the upstream request when the client leaves",
                               f"in {r.scope}: proxy_ignore_client_abort off;", ("disconnect",)))
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
    # `limit_conn ZONE N`: a limit per key (a client address, mostly) at or above --streams leaves
    # the streams through (proxies/fixed/nginx.conf bounds one address's slow uploads with one).
    allowed = limit_conn.value.split()[-1] if limit_conn.value else ""
    if limit_conn.value and not (allowed.isdigit() and int(allowed) >= o.streams):
        found.append(Suspicion("connection-limit", limit_conn.where,
                               f"{limit_conn.text}: streams beyond the limit are refused (503, or "
                               f"limit_conn_status) (--streams is {o.streams})",
                               f"limit_conn above the concurrent streams (at least {o.streams}), or none "
                               "for the streaming location", ("concurrent-streams",)))
    return found
