"""Envoy scenarios: the route timeout, the stream idle timeout, circuit breakers, body inspection,
token accounting."""
from __future__ import annotations

from labs.scenario import checks
from labs.catalogue.common import MANY_STREAMS_SERVER
from labs.scenario.model import Scaled, Scenario, Variant, Workload

ROUTE = "https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3/config/route/v3/route_components.proto"
HCM = ("https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3/extensions/filters/network/"
       "http_connection_manager/v3/http_connection_manager.proto")
BREAKERS = "https://www.envoyproxy.io/docs/envoy/v1.40.0/intro/arch_overview/upstream/circuit_breaking"
LUA = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/lua_filter"
EXT_PROC = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/ext_proc_filter"
SSE_TO_METADATA = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/sse_to_metadata_filter"
# envoy-token-accounting: characters of two bytes and more, each frame holding one sent in two
# writes (the server's split_utf8_ms), so an event reaches the counters split across body chunks.
ACCOUNTING_SCRIPT = ("Tokens are counted as they pass: café, naïve, über, déjà vu, and the "
                     "stream goes on to its end.")
# The broken settings the stress checks measure against (declared once, used by both).
ROUTE_TIMEOUT_S = 2.0  # envoy-route-timeout
STREAM_IDLE_TIMEOUT_S = 1.0  # envoy-stream-idle
MAX_REQUESTS, MAX_PENDING = 8, 4  # envoy-circuit-breaker

SCENARIOS = [
    Scenario(
        name="envoy-route-timeout",
        layer="proxy",
        kind="total-timeout",
        symptom="every answer longer than 15 s is cut off, with a 200 in the access log",
        path=("envoy",),
        workload=Workload(tokens_per_s=10.0, lab={"heartbeat_s": 0.25},
                          script=("Every token should reach the reader the moment the model makes it. "
                                  "A token stream should reach the reader one token at a time.")),
        broken=Variant(proxy={"envoy": {"route_timeout": ROUTE_TIMEOUT_S}}),
        fix=Variant(proxy={"envoy": {"route_timeout": "0s", "route_idle_timeout": "10s"}}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.proxy_stat_at_least("upstream_rq_timeout", 1,
                                                   "Envoy counted the upstream request timeout"),
                        checks.cut_at_deadline(ROUTE_TIMEOUT_S, "the route timeout"),
                        checks.finding("total-timeout")),
        cure_checks=(checks.complete_with_done(), checks.outlived(ROUTE_TIMEOUT_S, "the broken route timeout"),
                     checks.no_finding("total-timeout")),
        proxy_stats=("upstream_rq_timeout", "downstream_rq_2xx"),
        explanation=(
            "A route's `timeout` (default 15 s) bounds the whole response, measured from the request to "
            "the end of the stream, not a silence. A generation longer than that is cut: the client has a "
            "200, half an answer, no final chunk and no [DONE], and the access log says 200 with the flag "
            "UT. Heartbeats do not help (this lab sends one every 0.25 s in both variants). Disable it for "
            "streaming routes (`timeout: 0s`) and bound silences with an `idle_timeout` instead."),
        fix_summary="route: { timeout: 0s, idle_timeout: <longest silence> }",
        scaled=(Scaled("route timeout", "2s", "15s"),),
        sources=(f"{ROUTE}#envoy-v3-api-field-config-route-v3-routeaction-timeout",
                 f"{ROUTE}#envoy-v3-api-field-config-route-v3-routeaction-idle-timeout"),
    ),
    Scenario(
        name="envoy-stream-idle",
        layer="proxy",
        kind="idle-timeout",
        symptom="answers that pause to think are cut off",
        path=("envoy",),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 3.0}),
        broken=Variant(proxy={"envoy": {"stream_idle_timeout": STREAM_IDLE_TIMEOUT_S}}, lab={"heartbeat_s": 0}),
        fix=Variant(proxy={"envoy": {"stream_idle_timeout": "10s"}}, lab={"heartbeat_s": 0.25}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_after_silence(STREAM_IDLE_TIMEOUT_S, "stream_idle_timeout"),
                        checks.finding("idle-timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(STREAM_IDLE_TIMEOUT_S, "the broken stream_idle_timeout"),
                     checks.no_finding("idle-timeout")),
        proxy_stats=("downstream_rq_idle_timeout", "upstream_rq_timeout"),
        explanation=(
            "The HTTP connection manager's `stream_idle_timeout` (default 5 min) ends a stream that has "
            "been silent in both directions for that long: a 504 before the headers, a cut mid-stream "
            "after them. Heartbeats do reset it, unlike the route timeout. Raise it above the longest "
            "silence and send heartbeats."),
        fix_summary="stream_idle_timeout above the longest silence, plus `: ping` heartbeats",
        scaled=(Scaled("stream_idle_timeout", "1s", "5m"), Scaled("silence mid-stream", "3s", "minutes"),
                Scaled("heartbeat interval", "0.25s", "10s")),
        sources=(f"{HCM}#envoy-v3-api-field-extensions-filters-network-http-connection-manager-v3-httpconnectionmanager-stream-idle-timeout",),
    ),
    Scenario(
        name="envoy-circuit-breaker",
        layer="proxy",
        kind="connection-limit",
        symptom="instant 503s under load, while the server is idle",
        path=("envoy",),
        workload=Workload(streams=20, concurrency=20, tokens_per_s=10.0,
                          script="A token stream should reach the reader one token at a time."),
        broken=Variant(proxy={"envoy": {"max_requests": MAX_REQUESTS, "max_pending_requests": MAX_PENDING}},
                       server_args=MANY_STREAMS_SERVER),
        fix=Variant(proxy={"envoy": {"max_requests": 4096, "max_pending_requests": 4096}}),
        symptom_checks=(checks.status_seen(503),
                        checks.proxy_stat_at_least("upstream_rq_pending_overflow", 1,
                                                   "Envoy counted pending-request overflows",
                                                   logged="flags=UO "),
                        checks.sent_together_at_least(
                            MAX_REQUESTS + MAX_PENDING + 1,
                            f"past the breaker ({MAX_REQUESTS} requests + {MAX_PENDING} pending)"),
                        checks.finding("connection-limit")),
        cure_checks=(checks.complete_with_done(),
                     checks.server_peak_at_least(
                         "streamlab_active_streams", MAX_REQUESTS + MAX_PENDING + 1,
                         f"the broken breaker ({MAX_REQUESTS} requests + {MAX_PENDING} pending)"),
                     checks.no_finding("connection-limit")),
        proxy_stats=("upstream_rq_pending_overflow", "upstream_rq_pending_active", "upstream_cx_overflow"),
        explanation=(
            "Envoy's circuit breakers cap a cluster's concurrent requests (`max_requests`, default 1024) "
            "and the requests waiting for a connection (`max_pending_requests`, default 1024). Streams "
            "hold a request for their whole length, so a streaming cluster reaches the cap long before "
            "the server is busy; the overflow gets an instant 503 with `x-envoy-overloaded: true`. "
            "Measured: `max_connections` alone queues instead of failing. Set the thresholds above the "
            "concurrent streams you expect."),
        fix_summary="circuit_breakers thresholds above the expected concurrent streams",
        scaled=(Scaled("max_requests", "8", "1024"), Scaled("max_pending_requests", "4", "1024")),
        sources=(BREAKERS,),
    ),
    Scenario(
        name="envoy-body-inspection",
        layer="proxy",
        kind="buffering",
        symptom="the WAF turned streaming into a 10 s blank screen",
        path=("envoy",),
        workload=Workload(),
        broken=Variant(proxy={"envoy": {"body_inspection": True}}),
        fix=Variant(proxy={"envoy": {"body_inspection_skip_event_stream": True}}),
        symptom_checks=(checks.held_to_end(), checks.finding("buffering")),
        cure_checks=(checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("buffering")),
        explanation=(
            "A filter that needs the whole response body (here a Lua filter calling `body()`, standing in "
            "for a WAF or DLP scanner) makes Envoy buffer the response until it ends: headers and every "
            "event arrive together at the end. Skip body inspection for text/event-stream (or inspect "
            "chunk by chunk)."),
        fix_summary="skip whole-body inspection for Content-Type text/event-stream",
        sources=(LUA,),
    ),
    Scenario(
        name="envoy-token-accounting",
        layer="proxy",
        kind="buffering",
        symptom="since the gateway counts tokens, the answer appears all at once at the end",
        path=("envoy",),
        workload=Workload(script=ACCOUNTING_SCRIPT, lab={"split_utf8_ms": 20.0},
                          request={"stream_options": {"include_usage": True}}),
        broken=Variant(proxy={"envoy": {"ext_proc_body_mode": "BUFFERED"}}),
        fix=Variant(proxy={"envoy": {"ext_proc_body_mode": None, "sse_to_metadata": True}}),
        symptom_checks=(checks.held_to_end(),
                        checks.logged_count_matches_usage("counted", "the ext_proc processor"),
                        checks.finding("buffering")),
        cure_checks=(checks.streamed(), checks.complete_with_done(),
                     checks.logged_count_matches_usage("tokens", "the sse_to_metadata filter"),
                     checks.no_finding("buffering")),
        explanation=(
            "An AI gateway counts tokens by reading the response. With Envoy's ext_proc filter in "
            "`response_body_mode: BUFFERED` the processor (here a Python gRPC service, "
            "proxies/envoy/token_counter.py) gets the body in one message, so Envoy holds the "
            "headers and every event until the stream ends: the count is right and the stream is "
            "gone. STREAMED sends each chunk and streams, at one gRPC round trip per chunk, and the "
            "processor must join events split across chunks (envoyproxy/ai-gateway#2162). Envoy "
            "1.40's `sse_to_metadata` filter counts without holding anything: it parses the events "
            "as they pass and writes `usage.completion_tokens` into dynamic metadata, which the "
            "access log (or a rate limiter) reads at the end. Both counts are proven from Envoy's "
            "access log against the usage the client received."),
        fix_summary="count with the sse_to_metadata filter (or ext_proc STREAMED), not ext_proc BUFFERED",
        sources=(EXT_PROC, SSE_TO_METADATA, "https://github.com/envoyproxy/envoy/pull/46603",
                 "https://github.com/envoyproxy/ai-gateway/issues/2162"),
    ),
]
