"""Traefik scenarios: its one request-body limit, the buffering middleware, holds every response whole."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scenario, Variant, Workload

DOCS = "https://doc.traefik.io/traefik/v3.7/reference/routing-configuration/http/middlewares"
MAX_BODY = 8 * 1024 * 1024  # the lab server's own --max-body-bytes: what an operator would copy

SCENARIOS = [
    Scenario(
        name="traefik-buffering",
        layer="proxy",
        kind=None,  # `labs verify` does not read Traefik configs yet
        symptom="behind Traefik the whole answer arrives at once after a body limit was added",
        path=("traefik",),
        workload=Workload(),
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
]
