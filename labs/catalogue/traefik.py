"""Traefik scenarios: its one request-body limit (the buffering middleware) holds every response
whole; an entry point's writeTimeout is a deadline on the whole response."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload

DOCS = "https://doc.traefik.io/traefik/v3.7/reference/routing-configuration/http/middlewares"
ENTRYPOINTS = "https://doc.traefik.io/traefik/v3.7/reference/install-configuration/entrypoints"
MAX_BODY = 8 * 1024 * 1024  # the lab server's own --max-body-bytes: what an operator would copy
WRITE_TIMEOUT_S = 2.0  # traefik-write-timeout, scaled from the 30-60 s operators set
# The server's headers 50 ms after the request, as a model's come after some prefill: Traefik 3.7.15
# cuts about 1% of POST streams whose headers come back at once (docs/field-notes.md), which
# would make either variant fail now and then for a reason that is not the scenario's.
PREFILL = {"headers_delay_s": 0.05}

SCENARIOS = [
    Scenario(
        name="traefik-buffering",
        layer="proxy",
        kind="buffering",
        symptom="behind Traefik the whole answer arrives at once after a body limit was added",
        path=("traefik",),
        workload=Workload(lab=PREFILL),
        broken=Variant(proxy={"traefik": {"max_body_bytes": MAX_BODY}}),
        fix=Variant(proxy={"traefik": {"max_body_bytes": None}}),
        symptom_checks=(checks.held_to_end(),),
        cure_checks=(checks.streamed(), checks.complete_with_done()),
        explanation=(
            "Traefik limits request bodies with the buffering middleware (`maxRequestBodyBytes`), "
            "and that middleware buffers both ways: it reads the response whole (to memory, then a "
            "temporary file above memResponseBodyBytes) before it sends the first byte, so the "
            "stream arrives in one lump at its end. A file-provider config cannot turn the "
            "response buffer off (`disableResponseBuffer` exists only for Traefik's own ingress-"
            "nginx translation). Keep buffering off the streaming route and let the model server "
            "refuse large bodies (413); the entry point's `readTimeout` (60 s by default) still "
            "bounds how long a request body may take."),
        fix_summary="no buffering middleware on the streaming route (the server's own body limit)",
        sources=(f"{DOCS}/buffering/", f"{DOCS}/buffering/#opt-maxRequestBodyBytes"),
    ),
    Scenario(
        name="traefik-write-timeout",
        layer="proxy",
        kind="total-timeout",
        symptom="behind Traefik every long answer stops at the same second, with a 200 and no error",
        path=("traefik",),
        workload=Workload(tokens_per_s=10.0, lab={"heartbeat_s": 0.25, **PREFILL},
                          script=("Every token should reach the reader the moment the model makes it. "
                                  "A token stream should reach the reader one token at a time.")),
        broken=Variant(proxy={"traefik": {"write_timeout": WRITE_TIMEOUT_S}}),
        fix=Variant(proxy={"traefik": {"write_timeout": 0}}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_at_deadline(WRITE_TIMEOUT_S, "the entry point's writeTimeout"),
                        checks.finding("total-timeout")),
        cure_checks=(checks.complete_with_done(), checks.outlived(WRITE_TIMEOUT_S, "the broken writeTimeout"),
                     checks.no_finding("total-timeout")),
        explanation=(
            "An entry point's `transport.respondingTimeouts.writeTimeout` is Go's WriteTimeout: a deadline "
            "from the end of the request's headers to the end of the response, however steadily it "
            "streams. A generation longer than that is cut: the client has a 200, half an answer and no "
            "[DONE]. Heartbeats do not help (one every 0.25 s here, in both variants). It is 0 (no limit) "
            "by default; configs set it to bound slow clients, which `readTimeout` (the request) and "
            "`idleTimeout` (an idle keep-alive connection) already do. Measured on 3.7.15: `readTimeout` "
            "2 s did not cut a 5 s stream, and `forwardingTimeouts.responseHeaderTimeout` only bounds the "
            "wait for the server's headers (a 504), which this server sends at once."),
        fix_summary="writeTimeout 0s on the entry point (readTimeout and idleTimeout bound the clients)",
        scaled=(Scaled("writeTimeout", f"{WRITE_TIMEOUT_S:g}s", "the 30-60 s often set"),),
        sources=(f"{ENTRYPOINTS}/#opt-transport-respondingTimeouts-writeTimeout",),
    ),
]
