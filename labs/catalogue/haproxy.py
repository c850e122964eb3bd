"""HAProxy scenarios: MSG_MORE coalescing, compression, timeout server, abortonclose, maxconn."""
from __future__ import annotations

from labs.scenario import checks
from labs.catalogue.common import MANY_STREAMS_SERVER
from labs.scenario.model import Scaled, Scenario, Since, Variant, Workload

DOCS = "https://docs.haproxy.org/2.6/configuration.html"
LONG_SCRIPT = ("Every token should reach the reader the moment the model makes it. "
               "Every token should reach the reader the moment the model makes it.")
# The broken settings the stress checks measure against (declared once, used by both).
TIMEOUT_SERVER_S = 1.0  # haproxy-timeout-server
MAXCONN = 32  # haproxy-maxconn

SCENARIOS = [
    Scenario(
        name="haproxy-nodelay",
        layer="proxy",
        kind="coalescing",
        symptom="tokens arrive in stutters of two or three",
        path=("haproxy",),
        workload=Workload(lab={"stamp": True}),
        broken=Variant(),
        fix=Variant(proxy={"haproxy": {"http_no_delay": True}}),
        symptom_checks=(checks.finding("coalescing"),),
        cure_checks=(checks.streamed(), checks.hop_delay_at_most(0.25),
                     checks.no_finding("coalescing")),
        explanation=(
            "By default HAProxy sends response data with MSG_MORE, expecting more to follow, so the "
            "kernel holds a small write for up to ~200 ms hoping to fill a packet. For SSE that means "
            "events leave in groups: TTFT around 200 ms and two or three tokens per read. "
            "`option http-no-delay` sends every chunk immediately."),
        fix_summary="option http-no-delay",
        sources=(f"{DOCS}#4-option%20http-no-delay",),
    ),
    Scenario(
        name="haproxy-compression",
        layer="proxy",
        kind="compression-delay",
        symptom="every token shows up one token late (HAProxy before 2.9)",
        path=("haproxy",),
        workload=Workload(lab={"stamp": True}),
        broken=Variant(proxy={"haproxy": {"http_no_delay": True, "compression_algo": "gzip",
                                          "compression_types": ["text/event-stream"]}}),
        fix=Variant(proxy={"haproxy": {"compression_types": ["application/json"]}}),
        symptom_checks=(checks.content_encoded("gzip"), checks.hop_delay_at_least(0.5),
                        checks.finding("compression-delay")),
        cure_checks=(checks.content_encoded(None), checks.hop_delay_at_most(0.25), checks.streamed(),
                     checks.no_finding("compression-delay")),
        explanation=(
            "HAProxy's compression flushes each chunk, but before 2.9 its deflate stream (slz) kept "
            "the last bits of the input until more arrived: an event's final newline only leaves with "
            "the next chunk, so the client cannot dispatch an event until the following one is sent. "
            "Every token is one interval late (the hop delay shows it), and heartbeats do not help the "
            "last one. HAProxy 2.9 flushes those bits with every chunk (commit 56f15298d, June 2023, "
            "marked for backport to 2.6): with http-no-delay a current HAProxy sends each compressed "
            "event at once. Do not compress text/event-stream on an older one (Debian 12's 2.6.12); "
            "on a newer one it costs CPU, not time."),
        fix_summary="compression type without text/event-stream",
        finding=(
            "Measured here (21 events at 10/s, http-no-delay, 2026-12-06): HAProxy 2.6.12, gzip or "
            "deflate, hop delay p50 100 ms (one interval), TTFT 104-122 ms; 3.2.26, hop delay 0 ms, "
            "TTFT 7-17 ms, 21 reads. Without http-no-delay both group events (haproxy-nodelay): "
            "hop delay p50 207 ms on 2.6.12, 106 ms on 3.2.26."),
        since=(Since("haproxy", "2.9", "the compressor flushes its pending bits with every chunk: "
                     "the broken variant's events leave at once", ends_symptom=True),),
        sources=(f"{DOCS}#4-compression",
                 "https://github.com/haproxy/haproxy/commit/56f15298d97b16d2ccd243f8faeb2176f32f8bf6"),
    ),
    Scenario(
        name="haproxy-timeout-server",
        layer="proxy",
        kind="idle-timeout",
        symptom="long answers end mid-sentence, with a 200 already sent",
        path=("haproxy",),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 3.0}),
        broken=Variant(proxy={"haproxy": {"http_no_delay": True, "timeout_server": TIMEOUT_SERVER_S}},
                       lab={"heartbeat_s": 0}),
        fix=Variant(proxy={"haproxy": {"timeout_server": "10s"}}, lab={"heartbeat_s": 0.25}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_after_silence(TIMEOUT_SERVER_S, "timeout server"),
                        checks.finding("idle-timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(TIMEOUT_SERVER_S, "the broken timeout server"),
                     checks.no_finding("idle-timeout")),
        explanation=(
            "`timeout server` bounds the silence from the server. A silence longer than it (prefill, "
            "queueing, a tool call) ends the stream: before the headers with a 504, after them with a "
            "FIN and no [DONE]. `timeout client` and `timeout tunnel` made no difference for SSE. Set "
            "timeout server above the longest silence and send heartbeats more often than that."),
        fix_summary="timeout server above the longest silence, plus `: ping` heartbeats from the server",
        scaled=(Scaled("timeout server", "1s", "30s-60s in typical configs"),
                Scaled("silence mid-stream", "3s", "minutes"), Scaled("heartbeat interval", "0.25s", "10s")),
        sources=(f"{DOCS}#4-timeout%20server",),
    ),
    Scenario(
        name="haproxy-abortonclose",
        layer="proxy",
        kind="disconnect-not-propagated",
        symptom="slots stay busy after users leave, for as long as the model is silent",
        path=("haproxy",),
        workload=Workload(tokens_per_s=20.0, disconnect_after_events=3,
                          lab={"pause_after_tokens": 4, "pause_s": 2.0}, script=LONG_SCRIPT),
        broken=Variant(proxy={"haproxy": {"http_no_delay": True}}, lab={"heartbeat_s": 0}),
        fix=Variant(proxy={"haproxy": {"abortonclose": True}}),
        symptom_checks=(checks.departed(), checks.release_at_least(silence_share=0.75),
                        checks.finding("disconnect-not-propagated")),
        cure_checks=(checks.departed(), checks.server_heard_departures(), checks.release_within(4),
                     checks.tokens_for_nobody_at_most(3),
                     checks.no_finding("disconnect-not-propagated")),
        server_metrics=("streamlab_tokens_generated_total", "streamlab_tokens_after_disconnect_total",
                        'streamlab_requests_aborted_total{reason="disconnect"}'),
        explanation=(
            "HAProxy 2.6 by default does not close the server side when the client leaves; it notices "
            "only when it next writes to the client and that fails. While the model is silent nothing "
            "is written, so the server keeps the slot (and its KV cache) for the whole silence and "
            "generates more tokens for nobody. `option abortonclose` closes the server connection as "
            "soon as the client's close is seen."),
        fix_summary="option abortonclose",
        scaled=(Scaled("silence after the client leaves", "2s", "a long prefill or tool call"),),
        sources=(f"{DOCS}#4-option%20abortonclose",),
    ),
    Scenario(
        name="haproxy-maxconn",
        layer="proxy",
        kind="connection-limit",
        symptom="no errors, but under load the first token comes in waves",
        path=("haproxy",),
        workload=Workload(streams=50, concurrency=50, tokens_per_s=10.0,
                          script="A token stream should reach the reader one token at a time."),
        broken=Variant(proxy={"haproxy": {"http_no_delay": True, "maxconn_frontend": MAXCONN,
                                          "maxconn_global": MAXCONN}},
                       server_args=MANY_STREAMS_SERVER),
        fix=Variant(proxy={"haproxy": {"maxconn_frontend": 4096, "maxconn_global": 8192}}),
        # A queued stream starts one whole stream late; half a stream is midway between that and
        # no wave at all, so neither a busy machine's late first wave nor a cured run's noise
        # (spread ~0.1 of a stream) lands on the wrong side.
        symptom_checks=(checks.complete_with_done(), checks.ttft_spread_at_least(0.5),
                        checks.sent_together_at_least(MAXCONN + 1, f"maxconn {MAXCONN}"),
                        checks.finding("connection-limit")),
        cure_checks=(checks.complete_with_done(), checks.ttft_p99_within(5.0),
                     checks.server_peak_at_least("streamlab_active_streams", MAXCONN + 1,
                                                 f"the broken maxconn {MAXCONN}"),
                     checks.no_finding("connection-limit")),
        explanation=(
            "maxconn caps the connections HAProxy accepts. Streams beyond it are not refused: they wait "
            "in the kernel's accept queue until a stream ends, so the first token of the late ones comes "
            "one whole stream later, in waves, with no error anywhere. Raise maxconn (and the fd limit "
            "with it) above the streams you expect."),
        fix_summary="maxconn above the expected concurrent streams (global and frontend)",
        scaled=(Scaled("maxconn", "32", "the global default depends on ulimit -n; often 2000-4000 in configs"),
                Scaled("concurrent streams", "50", "thousands")),
        sources=(f"{DOCS}#3.2-maxconn", f"{DOCS}#4-maxconn"),
    ),
]
