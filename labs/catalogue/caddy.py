"""Caddy scenarios: `encode` decides on compression at the first write."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload

DOCS = "https://caddyserver.com/docs/caddyfile"
# A first event above encode's minimum_length (512 bytes) turns gzip on for the whole response.
FIRST_EVENT_BYTES = 600

SCENARIOS = [
    Scenario(
        name="caddy-encode",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="behind Caddy the answer arrives all at once, but only for some prompts",
        path=("caddy",),
        workload=Workload(lab={"pad_bytes": FIRST_EVENT_BYTES}),
        broken=Variant(proxy={"caddy": {"encode": ["gzip"]}}),
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
            "*text/event-stream*`); flush_interval -1 does not help, the encoder holds the bytes."),
        fix_summary="encode @compressible gzip, with @compressible not header Accept *text/event-stream*",
        finding=(
            "Measured here and not a failure: with normal small events Caddy streams even with "
            "encode on (the first write is below minimum_length, so that response is never "
            "compressed). With any encode directive the response headers wait for the first body "
            "byte."),
        scaled=(Scaled("first event", f"{FIRST_EVENT_BYTES} bytes", "a long first delta or a tool call"),),
        sources=(f"{DOCS}/directives/encode", f"{DOCS}/matchers#header"),
    ),
]
