"""HTTP/2 in front: nginx before 1.23 holds the HEADERS frame of a response until its first DATA frame."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scenario, Since, Variant, Workload

V2_DOCS = "https://nginx.org/en/docs/http/ngx_http_v2_module.html"
SSE_PARSING = "https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream"
FLUSH_COMMIT = "https://github.com/nginx/nginx/commit/a52433a04c58821fd95591e474d35995292f1090"
# nginx 1.23.0 sends an HTTP/2 response's HEADERS frame when it has the upstream's headers (commit
# a52433a, ticket #1743): the chat scenario's and mcp-held-headers' broken variants pass from there on.
HEADERS_FLUSHED = Since("nginx", "1.23.0", "HTTP/2 response headers are flushed as they come: the "
                        "broken variant's headers arrive at once", ends_symptom=True)
PREFILL_S = 3.0  # the server's silence after its headers, before the first data frame
# vLLM-style: the headers leave at once, the role chunk only with the first token.
HEADERS_THEN_SILENCE = {"role_chunk": "with-first-token", "first_token_delay_s": PREFILL_S}
OVER_H2 = {"http2": True, "verify_tls": False}  # the lab's own self-signed loopback certificate
TLS_H2 = {"nginx": {"tls_http2": True}}

SCENARIOS = [
    Scenario(
        name="nginx-http2-headers",
        layer="proxy",
        symptom="over HTTP/2 (nginx before 1.23) the response status and headers wait for the "
                "model's first token",
        path=("nginx",),
        base="fixed",
        workload=Workload(lab=HEADERS_THEN_SILENCE, client=OVER_H2),
        broken=Variant(proxy=TLS_H2, lab={"hello": False}),
        fix=Variant(proxy=TLS_H2, lab={"hello": True}),
        symptom_checks=(checks.http_version_is("2"),
                        checks.headers_at_least(0.5 * PREFILL_S, "half the silence after the server's headers"),
                        checks.first_token_after(PREFILL_S, "the server's silence after its headers")),
        cure_checks=(checks.http_version_is("2"), checks.headers_prompt(),
                     checks.first_token_after(PREFILL_S, "the server's silence after its headers"),
                     checks.complete_with_done()),
        explanation=(
            "A server that sends its response headers at once and its first data only with the "
            "first token (vLLM does: the role chunk waits for the prefill) has its headers held by "
            "nginx before 1.23 over HTTP/2: its HTTP/2 module makes the HEADERS frame when it has the "
            "header block, but sends it with the first DATA frame, so through a long prefill the "
            "client sees neither a status nor headers. Clients that time out on the headers "
            "(SDK connect/read timeouts, load balancers' first-byte timers) give up on a healthy "
            "request, and a UI cannot even show that the request was accepted. Over HTTP/1.1 the "
            "same nginx forwards the headers at once. The fix is on the server: an SSE comment "
            "(`: ok`) right after the headers, which every SSE client ignores, gives nginx a first "
            "DATA frame to send. nginx 1.23.0 fixed it (commit a52433a, \"HTTP/2: made it possible to "
            "flush response headers\", ticket #1743; not in its CHANGES): a current nginx sends the "
            "HEADERS frame with the upstream's headers, so this bites behind nginx 1.22 and older "
            "(Debian 12's), and the comment costs nothing on either."),
        fix_summary="the server writes an SSE comment right after the headers (`--hello`, `lab.hello`)",
        finding=(
            "Measured here (nginx 1.22, a 3 s silence after the server's headers): over HTTP/2 the "
            "HEADERS frame came at 3,004 ms, with the first token; over HTTP/1.1 to the same TLS "
            "listener the headers came at 1.6 ms. With the role chunk at the headers (the lab "
            "server's default) or the comment, HTTP/2 headers came in 2-6 ms. nginx 1.30.6, the same "
            "config: HTTP/2 headers at 1-10 ms without the comment, proxy_buffering off or on "
            "(1.22.1: 3,011-3,014 ms either way)."),
        since=(HEADERS_FLUSHED,),
        sources=(V2_DOCS, SSE_PARSING, FLUSH_COMMIT),
    ),
]
