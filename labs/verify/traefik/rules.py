"""What the settings of a Traefik config suggest, one `Rule` per finding kind and setting
(labs/verify/rules.py says how); the first rule of each kind is the fix for a measured fault no
setting explains.

Measured on Traefik 3.7.15 and no suspicion here: the compress middleware flushes each event
(gzip, brotli: one event per read, as direct); flushInterval does not delay an event stream or
a chunked answer (Go's reverse proxy flushes those at once); the entry point's readTimeout (2 s)
did not cut a 5 s stream (it bounds the request, not the response).
"""
from __future__ import annotations

from labs.verify.model import Options, Reading
from labs.verify.rules import Rule, Suspect


def _buffering(r: Reading, o: Options) -> Suspect | None:
    buffering = r.get("buffering")
    if buffering.value is None:
        return None
    return Suspect(f"{buffering.text}: the buffering middleware reads the whole answer before it sends the first "
                   "byte (measured on 3.7.15: a 2 s stream arrived in 2 reads at its end)",
                   f"on {r.scope}: no buffering middleware (a file cannot turn its response buffer off); limit "
                   "request bodies at the model server (its 413), and the entry point's readTimeout bounds how "
                   "long a body may take. Nothing the server sends turns the buffer off")


def _write_timeout(r: Reading, o: Options) -> Suspect | None:
    write = r.get("writeTimeout")
    if write.value is None or not 0 < write.value < o.max_stream_s:
        return None
    return Suspect(f"{write.text}: Go's deadline on the whole response: a stream longer than {write.value:g} s is "
                   f"cut however steadily it streams (--max-stream is {o.max_stream_s:g} s)",
                   "in the entry point's transport.respondingTimeouts: writeTimeout 0s (no limit; readTimeout and "
                   "idleTimeout still bound clients that send nothing); heartbeats do not help against it",
                   write.value)


def _in_flight(r: Reading, o: Options) -> Suspect | None:
    limit = r.get("inFlightReq")
    if not isinstance(limit.value, int) or limit.value >= o.streams:
        return None
    return Suspect(f"{limit.text}: at most {limit.value} requests at once per source, each stream one of them "
                   f"(--streams is {o.streams}); the rest get 429",
                   f"on {r.scope}: inFlightReq amount above the concurrent streams a client may hold (or none); "
                   "the model server's own queue then bounds them")


def _fast_proxy(r: Reading, o: Options) -> Suspect | None:
    fast = r.get("fastProxy")
    if not fast.value:
        return None
    return Suspect(f"{fast.text}: Traefik's fast proxy notices a client that left only at its next write to it "
                   "(measured on 3.7.15: 2.2 s into a 2 s silence; Go's proxy at once)",
                   "experimental.fastProxy off (Go's proxy passes a departure on at once, but ends a few POST "
                   "streams in a thousand just after their headers: docs/field-notes.md), or heartbeats from the "
                   "model server, so that a write comes soon")


RULES: tuple[Rule, ...] = (
    Rule("buffering", "buffering", "no buffering middleware on the streaming router", ("streaming",), _buffering),
    Rule("total-timeout", "writeTimeout", "writeTimeout 0s on the entry point", ("long-stream",), _write_timeout),
    Rule("connection-limit", "inFlightReq", "inFlightReq amount above the concurrent streams",
         ("concurrent-streams",), _in_flight),
    Rule("disconnect-not-propagated", "retry", "no middleware that holds the request (buffering, retry)"),
    Rule("disconnect-not-propagated", "fastProxy", "experimental.fastProxy off", ("disconnect",), _fast_proxy),
    # What the reading alone cannot tell: the measurement shows it.
    Rule("coalescing", "flushInterval", "flushInterval -1 on the service"),
    Rule("compression-delay", "compress", "compress with excludedContentTypes text/event-stream"),
    Rule("idle-timeout", "responseHeaderTimeout", "no forwarding timeout below the longest silence"),
)
