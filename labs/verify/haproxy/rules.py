"""What the settings of an HAProxy config suggest: one `Suspicion` per fault (labs/verify/rules.py says how)."""
from __future__ import annotations

from labs.verify.model import Options, Reading, Suspicion
from labs.verify.rules import SSE, timeout_fix


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    nodelay = r.get("option http-no-delay")
    if not nodelay.value:
        found.append(Suspicion("coalescing", nodelay.where,
                               f"{nodelay.text}: HAProxy sends with MSG_MORE and the kernel holds small "
                               "writes for up to ~200 ms", f"in {r.scope}: option http-no-delay (nothing the "
                               "server sends changes HAProxy's send path; the cost is more, smaller packets, which "
                               "a stream of small events sends anyway)", ("streaming",)))
    algo, types = r.get("compression algo"), r.get("compression type")
    if algo.value and (types.value is None or SSE in types.value):
        kept = [t for t in (types.value or []) if t != SSE] or ["application/json", "text/plain"]
        found.append(Suspicion("compression-delay", types.where if types.value else algo.where,
                               f"{algo.text} with {types.text}: the deflate stream keeps each event's last "
                               "bytes until the next one", f"in {r.scope}: compression type {' '.join(kept)}; "
                               "or, from the server, `Cache-Control: no-transform` on the stream (HAProxy does "
                               "not compress such a response: documented, and measured on 2.6)", ("gzip",)))
    server = r.get("timeout server")
    if server.value is not None and server.value < o.max_silence_s:
        found.append(Suspicion("idle-timeout", server.where,
                               f"{server.text}: a silence longer than {server.value:g} s ends the stream "
                               f"(--max-silence is {o.max_silence_s:g} s)",
                               f"in {r.scope}: timeout server {timeout_fix(server.value, o)}s, and `: ping` "
                               "heartbeats from the server (the cost of a long timeout: a hung server is "
                               "noticed that late)",
                               ("silence-before-first-token", "silence-mid-stream"), server.value))
    abort = r.get("option abortonclose")
    if not abort.value:
        found.append(Suspicion("disconnect-not-propagated", abort.where,
                               f"{abort.text}: the server side stays open after the client leaves, until "
                               "HAProxy next writes to the client",
                               f"option abortonclose in the defaults section that the chat frontend and {r.scope} "
                               "inherit (HAProxy needs it on both sides; before 3.3 a frontend takes it only from "
                               "its defaults, and from 3.3 it is the default in HTTP proxies: upgrading is the other "
                               "fix; the cost: a request whose client left is not forwarded, which is what a "
                               "stream wants)", ("disconnect",)))
    for name in ("global maxconn", "frontend maxconn", "server maxconn"):
        limit = r.settings.get(name)
        if limit is not None and limit.value is not None and limit.value < o.streams:
            found.append(Suspicion("connection-limit", limit.where,
                                   f"{limit.text}: streams beyond {limit.value} wait for one to end "
                                   f"(--streams is {o.streams})",
                                   f"maxconn {max(4096, o.streams * 4)} ({name.split()[0]})",
                                   ("concurrent-streams",)))
    counter = r.settings.get("counter limit")
    # A counter's limit at or above --streams leaves the streams through (as nginx's limit_conn).
    if counter is not None and counter.value.allowed < o.streams:
        found.append(Suspicion("connection-limit", counter.where,
                               f"{counter.text}: every stream counts, so streams beyond the limit are refused "
                               f"(--streams is {o.streams})",
                               f"in {r.scope}: a limit of at least {o.streams} (what one client's streams "
                               "reach at once), or none for the streaming backend", ("concurrent-streams",)))
    return found
