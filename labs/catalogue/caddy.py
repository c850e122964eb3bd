"""Caddy scenarios: `encode` decides on compression at the first write."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Since, Variant, Workload

DOCS = "https://caddyserver.com/docs/caddyfile"
# A first event above encode's minimum_length (512 bytes) turns gzip on for the whole response.
FIRST_EVENT_BYTES = 600
# Measured with Debian's Caddy 2.6.2 (Go 1.19.8), 300 sequential POST streams each, the synthetic
# server, httpx (docs/field-notes.md has the commands): without buffer_requests 9 truncated with
# plain reverse_proxy and 23 with encode gzip; with it 0 of 400 (and 0 of 300 under CPU load).
RACE = (
    "Both configs buffer sized request bodies (`buffer_requests`, as the fixed config does) for a "
    "second reason, measured here: without it Caddy 2.6.2 cuts a few percent of POST streams "
    "after their first bytes, 200 already sent, logging `reading from backend: use of closed "
    "network connection` (caddyserver/caddy#5431). As read in Go 1.19's net/http: the server "
    "reads and closes the rest of the request body when the response starts, and the upstream "
    "transport, whose last check-read of that body can come after the server's answer, takes "
    "the closed body for a failed request and drops the upstream connection mid-answer. A body "
    "read whole before the server is dialed leaves the transport nothing to race.")

SCENARIOS = [
    Scenario(
        name="caddy-encode",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="behind Caddy (before 2.9) the answer arrives all at once, but only for some prompts",
        path=("caddy",),
        # The fixed config, whose buffer_requests keeps this lab out of Caddy 2.6.2's
        # request-body race (RACE below), with only the event-stream matcher taken away.
        base="fixed",
        workload=Workload(lab={"pad_bytes": FIRST_EVENT_BYTES}),
        broken=Variant(proxy={"caddy": {"encode_skip_event_streams": False, "encode_types": ()}}),
        fix=Variant(proxy={"caddy": {"encode_skip_event_streams": True}}),
        symptom_checks=(checks.held_to_end(), checks.content_encoded("gzip")),
        cure_checks=(checks.streamed(), checks.content_encoded(None), checks.complete_with_done()),
        explanation=(
            "Caddy's `encode` decides whether to compress when the response's first bytes are "
            "written: below its minimum_length (512 bytes) it passes them through, above it turns "
            "gzip on, and the gzip writer then holds its output until its buffer fills or the "
            "response ends: the whole answer arrives at the end, in one burst. Small events stream, "
            "so it shows up only when the first event is large (a long first delta, a tool call). "
            "Keep event streams out of encode with a request matcher (`not header Accept "
            "*text/event-stream*`); flush_interval -1 does not help (measured when the fixed config "
            "had it), the encoder holds the bytes. Caddy 2.9.0 made a flush reach the encoder "
            "(caddyserver/caddy#6471): a current Caddy sends each compressed event as the proxy "
            "flushes it, so this bites behind Caddy 2.8 and older (Debian 12's 2.6.2). " + RACE),
        fix_summary="encode @compressible gzip, with @compressible not header Accept *text/event-stream*",
        finding=(
            "Measured here (Caddy 2.6.2) and not a failure: with normal small events Caddy streams even with "
            "encode on (the first write is below minimum_length, so that response is never "
            "compressed). With any encode directive the response headers wait for the first body "
            "byte. Caddy 2.11.4, the same config: gzip-encoded, TTFT 10 ms, 21 events in 21 reads "
            "(2.6.2: 2,011 ms, 1 read)."),
        scaled=(Scaled("first event", f"{FIRST_EVENT_BYTES} bytes", "a long first delta or a tool call"),),
        since=(Since("caddy", "2.9.0", "a flush reaches the encoder: the broken variant's compressed "
                     "events leave as they come", ends_symptom=True),),
        sources=(f"{DOCS}/directives/encode", f"{DOCS}/matchers#header",
                 "https://github.com/caddyserver/caddy/issues/5431",
                 "https://github.com/caddyserver/caddy/pull/6471"),
    ),
]
