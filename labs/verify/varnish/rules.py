"""What the settings of a VCL config suggest: one `Suspicion` per fault (labs/verify/rules.py says how).

`beresp.do_stream = false` stores the whole answer before its first byte leaves (the catalogue's
cdn-waiting-list finding, measured). `beresp.do_gzip = true` on an event stream compresses it as
it is fetched. The backend's silences are bounded by `first_byte_timeout` (before the headers: a
503) and `between_bytes_timeout` (mid-stream: the stream is cut after its 200; cdn-between-bytes);
a piped request by `pipe_timeout`. `send_timeout` is the total time a response may take to reach
the client (varnishd's parameter list), a bound on a stream's length. `.max_connections` caps the
connections to the backend, one per stream.
"""
from __future__ import annotations

from labs.verify.model import Options, Reading, Suspicion
from labs.verify.rules import SSE, timeout_fix

SILENCES = ("silence-before-first-token", "silence-mid-stream")


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    piped = r.value("vcl_recv") == "pipe"
    where = r.scope or r.route
    stream = r.get("do_stream")
    if not piped and stream.value is False:
        found.append(Suspicion("buffering", stream.where, f"{stream.text}: Varnish stores the whole answer "
                               "before its first byte goes to the client (TTFT = the whole answer)",
                               f"set beresp.do_stream = true; in vcl_backend_response (or remove the line), at "
                               f"least for {SSE} answers ({where}); nothing from the server turns it off. "
                               "Cost: none for the stream (the object is still fetched once; with "
                               "do_stream the client gets bytes as they arrive)", ("streaming",)))
    gzip = r.get("do_gzip")
    if not piped and gzip.value:
        found.append(Suspicion("compression-delay", gzip.where, f"{gzip.text}: Varnish gzips the {SSE} answer "
                               "as it fetches it, and its gzip holds the events (measured on 7.1 with "
                               "do_stream on: 10 events 200 ms apart arrived in one lump at the end)",
                               f'if (beresp.http.Content-Type ~ "{SSE}") {{ set beresp.do_gzip = false; }} in '
                               "vcl_backend_response; the server cannot opt out (`Cache-Control: "
                               "no-transform` is gzipped all the same)", ("gzip",)))
    idle = [("pipe_timeout", SILENCES)] if piped else [("first_byte_timeout", SILENCES[:1]),
                                                      ("between_bytes_timeout", SILENCES[1:])]
    for name, checks in idle:
        setting = r.get(name)
        if setting.value < o.max_silence_s:
            fix = (f"pipe_timeout {timeout_fix(setting.value, o)} (varnishd -p)" if piped else
                   f".{name} = {timeout_fix(setting.value, o)}s; in backend {r.value('backend')} (or `set "
                   f"bereq.{name} = {timeout_fix(setting.value, o)}s;` in vcl_backend_fetch for the streaming "
                   "route alone); and `: ping` heartbeats from the server, which keep any idle limit on the "
                   "path from firing (the cost of a long timeout: a hung backend is noticed that late)")
            found.append(Suspicion("idle-timeout", setting.where,
                                   f"{setting.text}: a silence of the server longer than {setting.value:g} s "
                                   f"ends the stream (--max-silence is {o.max_silence_s:g} s)", fix, checks,
                                   setting.value))
    send = r.get("send_timeout")
    if send.value < o.max_stream_s:
        found.append(Suspicion("total-timeout", send.where, f"{send.text}: the longest a whole response may take "
                               f"to reach the client: a stream longer than {send.value:g} s is cut (--max-stream "
                               f"is {o.max_stream_s:g} s)", f"set sess.send_timeout = "
                               f"{max(3600, int(o.max_stream_s * 2))}s; in vcl_recv, where it serves {where}",
                               ("long-stream",), send.value))
    limit = r.get("max_connections")
    if limit.value and limit.value < o.streams:
        found.append(Suspicion("connection-limit", limit.where, f"{limit.text}: at most {limit.value} connections "
                               f"to the backend, one per stream (--streams is {o.streams}); the next get a 503",
                               f".max_connections = {2 * o.streams}; in backend {r.value('backend')} (or remove "
                               "it). Cost: more streams reach the model server at once; its own concurrency "
                               "limit must then bound them",
                               ("concurrent-streams",)))
    return found
