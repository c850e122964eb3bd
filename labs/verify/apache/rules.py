"""What the settings of an Apache config suggest: its rules, one per finding kind and setting
(labs/verify/rules.py says how).

Measured here with httpd 2.4 (labs/catalogue/apache.py, tests/verify/test_apache.py): ProxyPass
streams SSE with or without `flushpackets=on` (mod_proxy_http flushes each backend read when
nothing more is pending), so flushpackets alone raises no suspicion; mod_deflate on
text/event-stream compresses but flushes with each event, so it stays a suspicion the gzip check
rarely confirms. The backend read waits at most `timeout=` (else ProxyTimeout, else Timeout); every
stream holds an MPM worker thread for its whole life.
"""
from __future__ import annotations

from labs.verify.apache.read import capacity, seconds
from labs.verify.model import Options, Reading
from labs.verify.rules import SSE, Rule, Suspect, timeout_fix


def _deflate(r: Reading, o: Options) -> Suspect | None:
    deflate, no_gzip = r.get("DEFLATE"), r.get("no-gzip")
    if deflate.value == "on" and no_gzip.value == "unset":
        return Suspect(
            f"{deflate.text}: mod_deflate compresses {SSE}; events can wait in zlib's buffer unless each "
            "backend flush reaches it", f"AddOutputFilterByType DEFLATE without {SSE} (or SetEnv no-gzip 1 "
            f"in {r.scope}); the server cannot opt out (measured on httpd 2.4.71: mod_deflate compresses a "
            "`Cache-Control: no-transform` answer too)")
    return None


def _waf(r: Reading, o: Options) -> Suspect | None:
    waf = r.get("ModSecurity")
    if waf.value == "reads-sse":
        return Suspect(
            f"{waf.text}: mod_security2 keeps a response it inspects, headers included, until it ends or "
            "reaches SecResponseBodyLimit, so the stream arrives in one lump (measured: make lab-waf-body-inspection)",
            f"SecResponseBodyMimeType without {SSE} (SecResponseBodyMimeTypesClear, then the types to inspect). "
            "Cost: the rules no longer read streamed answers (a data-leakage rule on them cannot fire); the "
            "request, the headers and every other type's body they still read")
    return None


def _idle_limit(r: Reading, o: Options) -> Suspect | None:
    idle = _idle(r)
    limit = seconds(idle)
    if limit < o.max_silence_s:
        return Suspect(
            f"{idle.text}: mod_proxy_http gives up on a backend silent for {limit:g} s and cuts the stream "
            f"(--max-silence is {o.max_silence_s:g} s)",
            f"timeout={timeout_fix(limit, o)} on {r.scope} (or ProxyTimeout {timeout_fix(limit, o)} for "
            "the whole server); and `: ping` heartbeats from the server, which keep any idle limit on the "
            "path from firing (the cost of a long timeout: a hung backend holds its worker that long)",
            limit, idle.where)
    return None


def _workers(r: Reading, o: Options) -> Suspect | None:
    streams = capacity(r)
    if streams < o.streams:
        workers = r.get("MaxRequestWorkers")
        per_child = int(r.value("ThreadsPerChild"))
        needed = max(o.streams * 2, 400)
        limit_of = workers if int(workers.value) <= streams else r.get("ServerLimit")
        return Suspect(
            f"{workers.text}, {r.get('ServerLimit').text}, {r.get('ThreadsPerChild').text} ({r.value('mpm')} "
            f"MPM): about {streams} streams at once, each holding a worker (--streams is {o.streams})",
            f"MaxRequestWorkers {needed}; ServerLimit {-(-needed // per_child)} (with ThreadsPerChild "
            f"{per_child}), server-wide (MPM settings have no per-route form). Cost: each worker is a "
            "thread with its stack, and more streams reach the model server at once; its own concurrency "
            "limit must bound them", where=limit_of.where)
    return None


def _idle(r: Reading):
    """The backend read timeout in effect: the ProxyPass `timeout=`, else ProxyTimeout, else Timeout."""
    key = r.get("timeout")
    return key if not key.text.endswith("(ProxyTimeout's)") else r.get("ProxyTimeout")


SILENCES = ("silence-before-first-token", "silence-mid-stream")
# The first rule of each kind is where a measured fault no setting explains is placed.
RULES: tuple[Rule, ...] = (
    Rule("buffering", "flushpackets", "ProxyPass ... flushpackets=on, and no output filter (mod_deflate, "
         "mod_substitute) on text/event-stream", ("streaming",)),
    Rule("buffering", "ModSecurity", f"SecResponseBodyMimeType without {SSE}", ("streaming",), _waf),
    Rule("coalescing", "flushpackets", "ProxyPass ... flushpackets=on", ("streaming",)),
    Rule("compression-delay", "DEFLATE", "AddOutputFilterByType DEFLATE without text/event-stream (or "
         "SetEnv no-gzip 1 in the streaming <Location>)", ("gzip",), _deflate),
    Rule("idle-timeout", "ProxyTimeout", "ProxyTimeout (or ProxyPass timeout=) above the longest silence",
         SILENCES, _idle_limit),
    Rule("total-timeout", "ProxyTimeout", "no limit on the whole response: ProxyTimeout bounds each read only",
         ("long-stream",)),
    # Late with heartbeats (--heartbeat): they did not reach the client as writes, and httpd
    # notices a departure only at a write (the first heartbeat after it, measured).
    Rule("disconnect-not-propagated", "ProxyPass", "let each heartbeat reach the client at once: no output "
         "filter (mod_deflate, mod_substitute) on text/event-stream; httpd notices a departed client only "
         "when a write to it fails", ("disconnect",)),
    Rule("connection-limit", "MaxRequestWorkers", "MaxRequestWorkers (and ServerLimit x ThreadsPerChild) "
         "above the concurrent streams", ("concurrent-streams",), _workers),
)
