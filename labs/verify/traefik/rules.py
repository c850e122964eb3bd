"""What the settings of a Traefik config suggest: one `Suspicion` per fault (labs/verify/rules.py says how).

Measured on Traefik 3.7.15 and no suspicion here: the compress middleware flushes each event
(gzip, brotli: one event per read, as direct); flushInterval does not delay an event stream or
a chunked answer (Go's reverse proxy flushes those at once); the entry point's readTimeout (2 s)
did not cut a 5 s stream (it bounds the request, not the response).
"""
from __future__ import annotations

from labs.verify.model import Options, Reading, Suspicion


def suspicions(r: Reading, o: Options) -> list[Suspicion]:
    found: list[Suspicion] = []
    buffering = r.settings.get("buffering")
    if buffering is not None:
        found.append(Suspicion(
            "buffering", buffering.where,
            f"{buffering.text}: the buffering middleware reads the whole answer before it sends the first "
            "byte (measured on 3.7.15: a 2 s stream arrived in 2 reads at its end)",
            f"on {r.scope}: no buffering middleware (a file cannot turn its response buffer off); limit "
            "request bodies at the model server (its 413), and the entry point's readTimeout bounds how "
            "long a body may take. Nothing the server sends turns the buffer off", ("streaming",)))
    write = r.get("writeTimeout")
    if write.value is not None and 0 < write.value < o.max_stream_s:
        found.append(Suspicion(
            "total-timeout", write.where,
            f"{write.text}: Go's deadline on the whole response: a stream longer than {write.value:g} s is "
            f"cut however steadily it streams (--max-stream is {o.max_stream_s:g} s)",
            "in the entry point's transport.respondingTimeouts: writeTimeout 0s (no limit; readTimeout and "
            "idleTimeout still bound clients that send nothing); heartbeats do not help against it",
            ("long-stream",), write.value))
    limit = r.settings.get("inFlightReq")
    if limit is not None and isinstance(limit.value, int) and limit.value < o.streams:
        found.append(Suspicion(
            "connection-limit", limit.where,
            f"{limit.text}: at most {limit.value} requests at once per source, each stream one of them "
            f"(--streams is {o.streams}); the rest get 429",
            f"on {r.scope}: inFlightReq amount above the concurrent streams a client may hold (or none); "
            "the model server's own queue then bounds them", ("concurrent-streams",)))
    fast = r.settings.get("fastProxy")
    if fast is not None:
        found.append(Suspicion(
            "disconnect-not-propagated", fast.where,
            f"{fast.text}: Traefik's fast proxy notices a client that left only at its next write to it "
            "(measured on 3.7.15: 2.2 s into a 2 s silence; Go's proxy at once)",
            "experimental.fastProxy off (Go's proxy passes a departure on at once, but ends a few POST "
            "streams in a thousand just after their headers: docs/field-notes.md), or heartbeats from the "
            "model server, so that a write comes soon", ("disconnect",)))
    return found
