"""What the settings of an Apache config suggest: one `Suspicion` per fault (labs/verify/rules.py says how).

Measured here with httpd 2.4 (labs/catalogue/apache.py, tests/verify/test_apache.py): ProxyPass
streams SSE with or without `flushpackets=on` (mod_proxy_http flushes each backend read when
nothing more is pending), so flushpackets alone raises no suspicion; mod_deflate on
text/event-stream compresses but flushes with each event, so it stays a suspicion the gzip check
rarely confirms. The backend read waits at most `timeout=` (else ProxyTimeout, else Timeout); every
stream holds an MPM worker thread for its whole life.
"""
from __future__ import annotations

from labs.verify.apache.read import capacity, seconds
from labs.verify.model import Options, Reading, Suspicion
from labs.verify.rules import SSE, timeout_fix


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    deflate, no_gzip = r.get("DEFLATE"), r.get("no-gzip")
    if deflate.value == "on" and no_gzip.value == "unset":
        found.append(Suspicion(
            "compression-delay", deflate.where,
            f"{deflate.text}: mod_deflate compresses {SSE}; events can wait in zlib's buffer unless each "
            "backend flush reaches it", f"AddOutputFilterByType DEFLATE without {SSE} (or SetEnv no-gzip 1 "
            f"in {r.scope}); the server cannot opt out (measured on httpd 2.4.71: mod_deflate compresses a "
            "`Cache-Control: no-transform` answer too)", ("gzip",)))
    idle = _idle(r)
    limit = seconds(idle)
    if limit < o.max_silence_s:
        found.append(Suspicion(
            "idle-timeout", idle.where,
            f"{idle.text}: mod_proxy_http gives up on a backend silent for {limit:g} s and cuts the stream "
            f"(--max-silence is {o.max_silence_s:g} s)",
            f"timeout={timeout_fix(limit, o)} on {r.scope} (or ProxyTimeout {timeout_fix(limit, o)} for "
            "the whole server); and `: ping` heartbeats from the server, which keep any idle limit on the "
            "path from firing (the cost of a long timeout: a hung backend holds its worker that long)",
            ("silence-before-first-token", "silence-mid-stream"), limit))
    streams = capacity(r)
    if streams < o.streams:
        workers = r.get("MaxRequestWorkers")
        per_child = int(r.value("ThreadsPerChild"))
        needed = max(o.streams * 2, 400)
        limit_of = workers if int(workers.value) <= streams else r.get("ServerLimit")
        found.append(Suspicion(
            "connection-limit", limit_of.where,
            f"{workers.text}, {r.get('ServerLimit').text}, {r.get('ThreadsPerChild').text} ({r.value('mpm')} "
            f"MPM): about {streams} streams at once, each holding a worker (--streams is {o.streams})",
            f"MaxRequestWorkers {needed}; ServerLimit {-(-needed // per_child)} (with ThreadsPerChild "
            f"{per_child}), server-wide (MPM settings have no per-route form). Cost: each worker is a "
            "thread with its stack, and more streams reach the model server at once; its own concurrency "
            "limit must bound them", ("concurrent-streams",)))
    return found


def _idle(r: Reading):
    """The backend read timeout in effect: the ProxyPass `timeout=`, else ProxyTimeout, else Timeout."""
    key = r.get("timeout")
    return key if not key.text.endswith("(ProxyTimeout's)") else r.get("ProxyTimeout")
