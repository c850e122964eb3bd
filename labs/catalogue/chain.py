"""A chain of proxies where one hop buffers: measure at each hop's entry to find which one."""
from __future__ import annotations

from labs.scenario import checks
from labs.catalogue.caddy import DOCS as CADDY_DOCS
from labs.catalogue.caddy import FIRST_EVENT_BYTES
from labs.catalogue.nginx import CLOSE_DELIMITED_SERVER, DOCS, NO_ACCEL_HEADER
from labs.scenario.model import Scenario, Since, Variant, Workload

SCENARIOS = [
    Scenario(
        name="chain-buffering",
        layer="chain",
        kind="buffering",
        symptom="the stream is a lump at the client, and each team says their proxy streams",
        path=("envoy", "haproxy", "nginx"),
        base="fixed",
        bisect=True,
        workload=Workload(),
        broken=Variant(proxy={"nginx": {"proxy_buffering": True, "proxy_http_version": "1.0",
                                        "proxy_connection_header": "close", "upstream_keepalive": None}},
                       server_args=CLOSE_DELIMITED_SERVER, lab=NO_ACCEL_HEADER),
        fix=Variant(proxy={"nginx": {"proxy_buffering": False, "proxy_http_version": "1.1",
                                     "proxy_connection_header": "", "upstream_keepalive": 64}}),
        symptom_checks=(checks.ttft_late(), checks.culprit_hop("nginx")),
        cure_checks=(checks.streamed(), checks.culprit_hop(None)),
        explanation=(
            "Envoy -> HAProxy -> nginx -> server, each with the production settings of proxies/fixed/, "
            "except that the nginx hop was left with buffering on and HTTP/1.0 upstream. At the client "
            "the stream is one late lump, and nothing says where it formed. The lab bisects the chain: "
            "it sends the same stream entering at each hop in turn, then directly to the server. The "
            "innermost entry that still shows the lump is the culprit; every hop in front of it only "
            "passes the lump along."),
        fix_summary="fix the hop the bisection names (here nginx: proxy_buffering off, HTTP/1.1 upstream)",
        sources=(f"{DOCS}#proxy_buffering",),
    ),
    Scenario(
        name="chain-edge-compression",
        layer="chain",
        symptom="behind the CDN some answers arrive all at once, and the CDN and nginx both stream "
                "(Caddy before 2.9 in between)",
        path=("varnish", "caddy", "nginx"),
        base="fixed",
        bisect=True,
        workload=Workload(lab={"pad_bytes": FIRST_EVENT_BYTES}),
        broken=Variant(proxy={"caddy": {"encode_skip_event_streams": False, "encode_types": ()}}),
        fix=Variant(proxy={"caddy": {"encode_skip_event_streams": True}}),
        symptom_checks=(checks.ttft_late(), checks.culprit_hop("caddy")),
        cure_checks=(checks.streamed(), checks.culprit_hop(None)),
        explanation=(
            "Varnish (a CDN) -> Caddy -> nginx -> server, each with the production settings of "
            "proxies/fixed/, except that the Caddy hop compresses every response (`encode gzip` "
            "without the matcher that keeps event streams out). Small events would stream; these "
            "carry a large first event (a tool call), so Caddy turns gzip on at the first write "
            "and its encoder holds the answer to the end. Varnish passes the held stream along "
            "(the fixed VCL passes event streams), so at the client it looks like the CDN's fault. "
            "Bisecting the chain (entering at each hop, then at the server) names Caddy. Caddy 2.9.0 "
            "made a flush reach the encoder (caddy-encode): behind a current Caddy the same chain "
            "streams, compressed (Caddy 2.11.4: TTFT 13 ms; 2.6.2: TTFT 2,043 ms, the whole answer at the end)."),
        fix_summary="fix the hop the bisection names (here Caddy: encode @compressible, skipping event streams)",
        since=(Since("caddy", "2.9.0", "a flush reaches the encoder: the chain streams, compressed",
                     ends_symptom=True),),
        sources=(f"{CADDY_DOCS}/directives/encode", "https://github.com/caddyserver/caddy/pull/6471"),
    ),
    Scenario(
        name="chain-accel-consumed",
        layer="chain",
        kind="buffering",
        symptom="the server sends X-Accel-Buffering: no, the team's nginx streams, and the "
                "platform's nginx in front still buffers",
        path=("nginx", "nginx:inner"),
        bisect=True,
        workload=Workload(),  # the server sends `X-Accel-Buffering: no` with every stream
        # Two nginx with proxy_buffering on (the default), the outer one speaking HTTP/1.0 to the
        # inner (the default before 1.29.7): the inner one's answer is close-delimited.
        broken=Variant(proxy={"nginx": {"proxy_http_version": "1.0"}}),
        fix=Variant(proxy={"nginx:inner": {"pass_accel_buffering": True}}),
        symptom_checks=(checks.ttft_late(), checks.culprit_hop("nginx", entry=1)),
        cure_checks=(checks.streamed(), checks.culprit_hop(None)),
        explanation=(
            "nginx honours an upstream's `X-Accel-Buffering: no` (it turns proxy_buffering off for "
            "that response) and then removes the header from what it sends on: it is one of the "
            "X-Accel-* headers nginx hides by default. A second nginx in front (a platform's ingress, "
            "a shared edge) never sees it and buffers with its own defaults. The bisection names the "
            "outer nginx, which is where the lump forms; the cause is the inner one consuming the "
            "header. Pass it on (`proxy_pass_header X-Accel-Buffering` in the inner nginx) or turn "
            "buffering off in the outer one. Only `yes` and `no` count as values (nginx's docs): "
            "`off` or `false` is ignored. The outer one holds the stream only when the inner one's "
            "answer is close-delimited, as it is to an HTTP/1.0 request (nginx's default towards an "
            "upstream before 1.29.7, written here); since 1.29.7 the outer one asks in HTTP/1.1, the "
            "answer is chunked, and it forwards each chunk, header or not."),
        fix_summary="inner nginx: proxy_pass_header X-Accel-Buffering; (or proxy_buffering off in the outer one)",
        finding=(
            "Measured here (two nginx 1.22.1 with their defaults, 20 events at 10 tok/s): entering at "
            "the inner nginx, 20 reads and TTFT 3 ms, no X-Accel-Buffering in its answer; at the outer "
            "one TTFT 1,405 ms in 2 reads (its 4k/8k buffers filled once, then the end). With "
            "`proxy_pass_header X-Accel-Buffering` in the inner one, the outer streamed (TTFT 3 ms, "
            "20 reads). The values, measured on one nginx 1.22.1 buffering an HTTP/1.0 reply of 11 "
            "events over 2 s: `no` and `No` streamed (first event 17 ms); `off`, `false` and `0` "
            "were ignored like no header (first event at 2,020-2,024 ms, all at the end)."),
        since=(Since("nginx", "1.29.7", "HTTP/1.1 towards the upstream by default: the inner nginx "
                     "answers chunked and the outer one forwards each chunk"),),
        sources=(f"{DOCS}#proxy_pass_header", f"{DOCS}#proxy_buffering", f"{DOCS}#proxy_hide_header"),
    ),
]
