"""What the settings of a VCL config suggest: one `Rule` per finding kind and setting (labs/verify/rules.py).

`beresp.do_stream = false` stores the whole answer before its first byte leaves (the catalogue's
cdn-waiting-list finding, measured). `beresp.do_gzip = true` on an event stream compresses it as
it is fetched. The backend's silences are bounded by `first_byte_timeout` (before the headers: a
503) and `between_bytes_timeout` (mid-stream: the stream is cut after its 200; cdn-between-bytes);
a piped request by `pipe_timeout`. `send_timeout` is the total time a response may take to reach
the client (varnishd's parameter list), a bound on a stream's length. `.max_connections` caps the
connections to the backend, one per stream.
"""
from __future__ import annotations

from typing import Callable

from labs.verify.model import Options, Reading
from labs.verify.rules import SSE, Rule, Suspect, connection_cap, timeout_fix

SILENCES = ("silence-before-first-token", "silence-mid-stream")


def _piped(r: Reading) -> bool:
    """vcl_recv pipes the request: bytes are copied as they come, vcl_backend_response does not run."""
    return r.value("vcl_recv") == "pipe"


def _where(r: Reading) -> str:
    return r.scope or r.route


def _stored(r: Reading, o: Options) -> Suspect | None:
    stream = r.get("do_stream")
    if _piped(r) or stream.value is not False:
        return None
    return Suspect(f"{stream.text}: Varnish stores the whole answer before its first byte goes to the client "
                   "(TTFT = the whole answer)",
                   f"set beresp.do_stream = true; in vcl_backend_response (or remove the line), at least for "
                   f"{SSE} answers ({_where(r)}); nothing from the server turns it off. Cost: none for the stream "
                   "(the object is still fetched once; with do_stream the client gets bytes as they arrive)")


def _gzipped(r: Reading, o: Options) -> Suspect | None:
    gzip = r.get("do_gzip")
    if _piped(r) or not gzip.value:
        return None
    return Suspect(f"{gzip.text}: Varnish gzips the {SSE} answer as it fetches it, and its gzip holds the events "
                   "(measured on 7.1 with do_stream on: 10 events 200 ms apart arrived in one lump at the end)",
                   f'if (beresp.http.Content-Type ~ "{SSE}") {{ set beresp.do_gzip = false; }} in '
                   "vcl_backend_response; the server cannot opt out (`Cache-Control: no-transform` is gzipped "
                   "all the same)")


def _silence(name: str, piped: bool) -> Callable[[Reading, Options], Suspect | None]:
    """The limit `name` on a silence of the server's, on a piped request (`piped`) or a fetched one."""
    def suspect(r: Reading, o: Options) -> Suspect | None:
        setting = r.get(name)
        if _piped(r) != piped or setting.value >= o.max_silence_s:
            return None
        longer = timeout_fix(setting.value, o)
        fix = (f"pipe_timeout {longer} (varnishd -p)" if piped else
               f".{name} = {longer}s; in backend {r.value('backend')} (or `set bereq.{name} = {longer}s;` in "
               "vcl_backend_fetch for the streaming route alone); and `: ping` heartbeats from the server, which "
               "keep any idle limit on the path from firing (the cost of a long timeout: a hung backend is "
               "noticed that late)")
        return Suspect(f"{setting.text}: a silence of the server longer than {setting.value:g} s ends the stream "
                       f"(--max-silence is {o.max_silence_s:g} s)", fix, setting.value)
    return suspect


def _send(r: Reading, o: Options) -> Suspect | None:
    send = r.get("send_timeout")
    if send.value >= o.max_stream_s:
        return None
    return Suspect(f"{send.text}: the longest a whole response may take to reach the client: a stream longer "
                   f"than {send.value:g} s is cut (--max-stream is {o.max_stream_s:g} s)",
                   f"set sess.send_timeout = {max(3600, int(o.max_stream_s * 2))}s; in vcl_recv, where it serves "
                   f"{_where(r)}", send.value)


def _connections(r: Reading, o: Options) -> Suspect | None:
    return connection_cap(r.get("max_connections"), o, "the backend",
                          f".max_connections = {2 * o.streams}; in backend {r.value('backend')}", "; the next get a 503")


# The first rule of each kind is where a measured fault no setting explains is placed.
RULES: tuple[Rule, ...] = (
    Rule("buffering", "do_stream", "set beresp.do_stream = true; in vcl_backend_response (the default: remove "
         "a `false`)", ("streaming",), _stored),
    Rule("coalescing", "do_stream", f"set beresp.do_stream = true; and no do_gzip on {SSE}"),
    Rule("compression-delay", "do_gzip", f"no beresp.do_gzip for {SSE} answers", ("gzip",), _gzipped),
    Rule("idle-timeout", "between_bytes_timeout", ".first_byte_timeout and .between_bytes_timeout in the backend "
         "above the longest silence", SILENCES[1:], _silence("between_bytes_timeout", piped=False)),
    Rule("idle-timeout", "first_byte_timeout", ".first_byte_timeout in the backend above the first token's "
         "silence", SILENCES[:1], _silence("first_byte_timeout", piped=False)),
    Rule("idle-timeout", "pipe_timeout", "pipe_timeout (varnishd -p) above the longest silence", SILENCES,
         _silence("pipe_timeout", piped=True)),
    Rule("total-timeout", "send_timeout", "set sess.send_timeout in vcl_recv above the longest answer",
         ("long-stream",), _send),
    # Late with heartbeats (--heartbeat): they did not reach the client as writes, and Varnish
    # notices a departure only at a write (the second heartbeat after it, measured): the reader's
    # departure_at_write says so whatever the VCL.
    Rule("disconnect-not-propagated", "vcl_recv", f"let each heartbeat reach the client at once: beresp.do_stream "
         f"true and no beresp.do_gzip on {SSE}; Varnish notices a departed client only when a write to it fails"),
    Rule("connection-limit", "max_connections", ".max_connections in the backend above the concurrent streams",
         ("concurrent-streams",), _connections),
)
