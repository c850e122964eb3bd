"""nginx scenarios: buffering, buffer sizes, the accel header, gzip, read timeout, client abort,
connections (nginx towards its upstream: labs/catalogue/nginx_upstream.py)."""
from __future__ import annotations

from labs.lab.exposing import CLOSE_DELIMITED
from labs.scenario import checks
from labs.catalogue.common import MANY_STREAMS_SERVER
from labs.scenario.model import Scaled, Scenario, Since, Variant, Workload

DOCS = "https://nginx.org/en/docs/http/ngx_http_proxy_module.html"
STREAMING_UPSTREAM = {"proxy_http_version": "1.1", "proxy_connection_header": ""}
# uvicorn's h11 protocol answers an HTTP/1.0 request close-delimited (no chunked framing), as
# most servers do; httptools answers chunked even then, and nginx forwards chunks as they come.
CLOSE_DELIMITED_SERVER = CLOSE_DELIMITED
NO_ACCEL_HEADER = {"omit_headers": ["X-Accel-Buffering"]}
# The broken settings the stress checks measure against (declared once, used by both).
READ_TIMEOUT_S = 1.0  # nginx-read-timeout: proxy_read_timeout
WORKER_CONNECTIONS = 64  # nginx-worker-connections
# Each proxied stream holds two of a worker's connections (the client's and the upstream's).
STREAMS_PER_WORKER = WORKER_CONNECTIONS // 2
BIG_EVENT_BYTES = 8000  # nginx-buffer-size: a tool call's arguments, an image, in one event

SCENARIOS = [
    Scenario(
        name="nginx-buffering",
        layer="proxy",
        kind="buffering",
        symptom="blank screen, then the whole answer at once",
        path=("nginx",),
        workload=Workload(),
        # An old snippet's pinned HTTP/1.0 (1.22's default): 1.30 then runs the same config.
        broken=Variant(proxy={"nginx": {"proxy_http_version": "1.0"}}, server_args=CLOSE_DELIMITED_SERVER,
                       lab=NO_ACCEL_HEADER),
        fix=Variant(proxy={"nginx": {"proxy_buffering": False, **STREAMING_UPSTREAM}}),
        symptom_checks=(checks.finding("buffering"), checks.complete_with_done()),
        cure_checks=(checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("buffering")),
        explanation=(
            "nginx buffers a response it proxies (proxy_buffering on, the default) and hands a "
            "partly filled buffer on only when it knows more is coming: for a chunked reply, at "
            "every chunk, so the events flow; for a reply with no framing, one that ends when the "
            "connection closes, never: it waits for a full buffer (one 4 KB page) or the end, and "
            "the first token arrives seconds late, in one or two lumps. What makes the reply "
            "close-delimited is HTTP/1.0 towards the upstream: most servers answer an HTTP/1.0 "
            "request so. On nginx 1.30 (since 1.29.7) the upstream default is HTTP/1.1 with "
            "keep-alive, and a config with nothing but proxy_pass streams over plain HTTP; what "
            "still holds the stream is a `proxy_http_version 1.0` an old snippet pinned (this "
            "lab's broken config), an upstream that answers close-delimited even to HTTP/1.1, or "
            "TLS towards the client, where the buffered path's small writes wait for the end, "
            "chunked or not. On nginx 1.22 (Debian 12) and every release before 1.29.7, HTTP/1.0 "
            "is the default, so proxy_pass alone holds it. The fix works on both: buffering off "
            "(nginx forwards whatever arrives, framed or not, over TLS too) and HTTP/1.1 upstream, "
            "with an empty Connection header so the connection can be kept alive."),
        fix_summary='proxy_buffering off; proxy_http_version 1.1; proxy_set_header Connection "";',
        finding=(
            "Measured here, 2026-12-06, nginx 1.30.6 (Debian sid) and 1.22.1 (Debian 12), the lab's "
            "server with uvicorn's h11 protocol and no X-Accel-Buffering, this lab's 21 events at "
            "10/s, 3 runs each (python -m tests.reliability.nginx_buffering_releases): with "
            "nothing but proxy_pass, 1.30.6 streams (TTFT 7-18 ms, 21 reads) and 1.22.1 holds "
            "(TTFT 1,307-1,312 ms, 2 reads); with `proxy_http_version 1.0` pinned both hold alike "
            "(TTFT 1,312-1,326 ms, 2 reads). An upstream that answers close-delimited even to "
            "nginx's HTTP/1.1 request (the fake upstream's /http10, 32 events at 10/s) is held by "
            "both (TTFT 3,014-3,093 ms, 2 reads) and streams with buffering off (1-4 ms, 32 reads). "
            "A slow reader (a 1 KB receive buffer, nothing read for 1.5 s) does not bring the "
            "lump back on 1.30.6: the backlog in one read, then one event a read, as with "
            "buffering off (1.22.1: all 21 in one read at 2.8 s). Over TLS to the client, HTTP/1.1 "
            "upstream and buffering on, both releases send the whole answer in one read at the end "
            "(TTFT 2,005-2,045 ms); buffering off streams (8-34 ms, 21 reads). uvicorn's default httptools "
            "protocol answers even HTTP/1.0 chunked, and then both releases stream with 1.0 pinned "
            "(TTFT 14-26 ms, 21 reads): the bug hides behind one server and bites behind the "
            "next. Set both directives anyway."),
        sources=(f"{DOCS}#proxy_buffering", f"{DOCS}#proxy_http_version",
                 "https://nginx.org/en/CHANGES",
                 "https://www.nginx.com/resources/wiki/start/topics/examples/x-accel/#x-accel-buffering"),
        since=(Since("nginx", "1.29.7", "HTTP/1.1 with keep-alive became the upstream default, so a "
                     "config with nothing but proxy_pass gets chunked replies and streams",
                     own_defaults={"proxy_http_version": None}),),
    ),
    Scenario(
        name="nginx-accel-header",
        layer="proxy",
        kind="buffering",
        symptom="streams directly, stalls behind a proxy you do not control",
        path=("nginx",),
        workload=Workload(),
        broken=Variant(proxy={"nginx": {"proxy_http_version": "1.0"}}, server_args=CLOSE_DELIMITED_SERVER,
                       lab=NO_ACCEL_HEADER),
        fix=Variant(lab={"omit_headers": []}),
        symptom_checks=(checks.finding("buffering"),),
        cure_checks=(checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("buffering")),
        explanation=(
            "The same buffering as nginx-buffering (proxy_buffering on, HTTP/1.0 towards the upstream: "
            "nginx's default before 1.29.7, written here as old configs and managed proxies still write "
            "it), but the fix is on the server: a response header `X-Accel-Buffering: no` tells nginx to "
            "stop buffering this one response. It is the fix for proxies you cannot configure (a managed "
            "ingress), and costs nothing elsewhere. Since nginx 1.29.7 (1.30 stable) the upstream speaks "
            "HTTP/1.1 by default, the reply is chunked, and nginx forwards it as it comes, header or not."),
        finding=(
            "Measured here: whether the server leaves the header out for every response "
            "(`--omit-header X-Accel-Buffering`) or for one request (`lab.omit_headers`), nginx gets "
            "the same bytes in the same writes and holds them alike (32 events at 10/s: 3 reads, TTFT "
            "1,403-1,421 ms on both engines). What decides whether the missing header hurts is the reply's framing: "
            "close-delimited (the lab's `--http h11`), held; chunked (uvicorn's default httptools), "
            "forwarded chunk by chunk (TTFB 2-3 ms) with or without the header."),
        fix_summary="the server sends `X-Accel-Buffering: no` with every streaming response",
        since=(Since("nginx", "1.29.7", "HTTP/1.1 towards the upstream by default: a chunked reply "
                     "streams without the header; the stream is held where 1.0 is still written"),),
        sources=(f"{DOCS}#proxy_buffering", f"{DOCS}#proxy_ignore_headers"),
    ),
    Scenario(
        name="nginx-gzip",
        layer="proxy",
        kind="compression-delay",
        symptom="streams until someone turns on gzip for text/event-stream",
        path=("nginx",),
        workload=Workload(lab={"stamp": True}),
        broken=Variant(proxy={"nginx": {**STREAMING_UPSTREAM, "gzip": True,
                                        "gzip_types": ["text/event-stream"]}}, lab=NO_ACCEL_HEADER),
        fix=Variant(proxy={"nginx": {"gzip_types": ["application/json"]}}),
        symptom_checks=(checks.held_to_end(), checks.content_encoded("gzip"),
                        checks.finding("compression-delay")),
        cure_checks=(checks.streamed(), checks.content_encoded(None),
                     checks.no_finding("compression-delay")),
        explanation=(
            "With proxy_buffering on and an HTTP/1.1 (chunked) upstream, nginx forwards each chunk as it "
            "arrives. gzip undoes that: the gzip filter collects output until its buffer fills or the "
            "response ends, so every event waits for the end. Exclude text/event-stream from gzip_types "
            "(keep compressing JSON)."),
        fix_summary="gzip_types without text/event-stream",
        finding=(
            "Measured here: with proxy_buffering off, nginx gzip does a sync flush per chunk and the "
            "stream still flows (gzip-encoded, TTFT within a few ms). It is the buffering that gzip "
            "relies on, not compression itself, that holds the events."),
        sources=("https://nginx.org/en/docs/http/ngx_http_gzip_module.html#gzip_types",
                 f"{DOCS}#proxy_buffering"),
    ),
    Scenario(
        name="nginx-read-timeout",
        layer="proxy",
        kind="idle-timeout",
        symptom="long answers end mid-sentence, with a 200 already sent",
        path=("nginx",),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 3.0}),
        broken=Variant(proxy={"nginx": {"proxy_buffering": False, **STREAMING_UPSTREAM,
                                        "proxy_read_timeout": READ_TIMEOUT_S}},
                       lab={"heartbeat_s": 0}),
        fix=Variant(proxy={"nginx": {"proxy_read_timeout": "10s"}}, lab={"heartbeat_s": 0.25}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_after_silence(READ_TIMEOUT_S, "proxy_read_timeout"),
                        checks.finding("idle-timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(READ_TIMEOUT_S, "the broken proxy_read_timeout"),
                     checks.no_finding("idle-timeout")),
        explanation=(
            "proxy_read_timeout bounds the silence between two reads from the upstream, not the whole "
            "response. A model that thinks (prefill, a tool call, a queue) for longer than that gets its "
            "stream cut: the client has a 200 and half an answer, with no final chunk and no [DONE]. "
            "Before the headers the same timeout gives a 504 page instead. Raise the timeout above the "
            "longest silence and have the server send SSE comment heartbeats (`: ping`) more often "
            "than that."),
        fix_summary="proxy_read_timeout above the longest silence, plus `: ping` heartbeats from the server",
        scaled=(Scaled("proxy_read_timeout", "1s", "60s"), Scaled("silence mid-stream", "3s", "minutes"),
                Scaled("heartbeat interval", "0.25s", "10s")),
        sources=(f"{DOCS}#proxy_read_timeout",
                 "https://html.spec.whatwg.org/multipage/server-sent-events.html#authoring-notes"),
    ),
    Scenario(
        name="nginx-client-abort",
        layer="proxy",
        kind="disconnect-not-propagated",
        symptom="the GPU keeps generating for users who closed the tab",
        path=("nginx",),
        workload=Workload(tokens_per_s=20.0, disconnect_after_events=3,
                          script="Every token should reach the reader the moment the model makes it. "
                                 "Every token should reach the reader the moment the model makes it."),
        broken=Variant(proxy={"nginx": {"proxy_ignore_client_abort": True, "proxy_http_version": "1.0"}},
                       server_args=CLOSE_DELIMITED_SERVER, lab=NO_ACCEL_HEADER),
        fix=Variant(proxy={"nginx": {"proxy_ignore_client_abort": False}}),
        symptom_checks=(checks.departed(), checks.tokens_for_nobody_at_least(0.5), checks.release_at_least(10),
                        checks.finding("disconnect-not-propagated")),
        cure_checks=(checks.departed(), checks.server_heard_departures(), checks.release_within(4),
                     checks.no_finding("disconnect-not-propagated")),
        server_metrics=("streamlab_tokens_generated_total", "streamlab_tokens_after_disconnect_total",
                        'streamlab_requests_aborted_total{reason="disconnect"}'),
        explanation=(
            "With proxy_ignore_client_abort on, nginx keeps the upstream request when the client goes "
            "away, so the server never learns that nobody reads: it generates the whole answer and holds "
            "its slot (KV cache) for nothing. The default (off) closes the upstream connection at once and "
            "a server that handles disconnects stops within one decode step. The server stays unaware "
            "only while nginx holds the reply (HTTP/1.0 upstream, close-delimited: nginx's default "
            "before 1.29.7, written here). Since 1.29.7 nginx speaks HTTP/1.1 upstream by default, "
            "writes each event on, and closes the upstream at the first write the departed client "
            "fails, proxy_ignore_client_abort or not."),
        fix_summary="proxy_ignore_client_abort off; (the default)",
        since=(Since("nginx", "1.29.7", "HTTP/1.1 towards the upstream by default: nginx writes each "
                     "event on and notices the departure at the next write"),),
        finding=(
            "Measured here: the server never hears of the departure only while nginx buffers (a "
            "close-delimited upstream reply, as in this lab). Behind a chunked upstream nginx writes "
            "each event to the client at once, the write fails, and the upstream is closed about two "
            "token intervals after the client left, even with proxy_ignore_client_abort on."),
        sources=(f"{DOCS}#proxy_ignore_client_abort",),
    ),
    Scenario(
        name="nginx-worker-connections",
        layer="proxy",
        kind="connection-limit",
        symptom="under load some users get instant errors, and the access log shows nothing",
        path=("nginx",),
        workload=Workload(streams=60, concurrency=60, tokens_per_s=10.0,
                          script="A token stream should reach the reader one token at a time."),
        broken=Variant(proxy={"nginx": {"proxy_buffering": False, **STREAMING_UPSTREAM,
                                        "worker_processes": 1, "worker_connections": WORKER_CONNECTIONS}},
                       server_args=MANY_STREAMS_SERVER),
        fix=Variant(proxy={"nginx": {"worker_connections": 4096, "worker_rlimit_nofile": 16384}}),
        symptom_checks=(checks.outcome_not_only("complete"),
                        checks.sent_together_at_least(STREAMS_PER_WORKER + 1,
                                                      f"more streams than {WORKER_CONNECTIONS} connections hold"),
                        checks.finding("connection-limit")),
        cure_checks=(checks.complete_with_done(),
                     checks.server_peak_at_least("streamlab_active_streams", STREAMS_PER_WORKER + 1,
                                                 f"what {WORKER_CONNECTIONS} worker_connections hold"),
                     checks.no_finding("connection-limit")),
        explanation=(
            "Each proxied stream holds two connections in an nginx worker, the client's and the "
            "upstream's, plus the listening socket. With worker_connections 64, about 30 streams fit; "
            "the rest are reset or closed before any header, are absent from the access log, and leave "
            "one line in the error log: `worker_connections are not enough`. Raise worker_connections "
            "(two per stream) and the open-file limit with it."),
        fix_summary="worker_connections 4096; worker_rlimit_nofile 16384;",
        scaled=(Scaled("worker_connections", "64", "512 (Debian's nginx.conf: 768)"),
                Scaled("concurrent streams", "60", "thousands"),),
        sources=("https://nginx.org/en/docs/ngx_core_module.html#worker_connections",
                 "https://nginx.org/en/docs/ngx_core_module.html#worker_rlimit_nofile"),
    ),
    Scenario(
        name="nginx-buffer-size",
        layer="proxy",
        kind=None,  # `labs verify` streams small events: a path check cannot see this one
        symptom="small tokens stream, but big events (tool calls, images) arrive one event late",
        path=("nginx",),
        workload=Workload(lab={"stamp": True, "pad_bytes": BIG_EVENT_BYTES}),
        broken=Variant(proxy={"nginx": {**STREAMING_UPSTREAM}}, lab=NO_ACCEL_HEADER),
        fix=Variant(proxy={"nginx": {"proxy_buffering": False}}),
        symptom_checks=(checks.hop_delay_at_least(0.5), checks.complete_with_done()),
        cure_checks=(checks.hop_delay_at_most(0.25), checks.streamed(), checks.complete_with_done()),
        explanation=(
            "With proxy_buffering on and a chunked (HTTP/1.1) upstream, nginx forwards what it has "
            "read at once, so small events stream. An event larger than its buffers (8 x 4 KB, and "
            "proxy_busy_buffers_size 8 KB of them may be in flight to the client) does not: the part "
            "that no longer fits waits until the next read frees a buffer, which is the next event. "
            "Every big event arrives one event late (the hop delay is one token interval). Turn "
            "buffering off for streams (or raise proxy_buffers and proxy_busy_buffers_size above "
            "the largest event)."),
        fix_summary="proxy_buffering off (or proxy_buffers / proxy_busy_buffers_size above the largest event)",
        finding=(
            "Measured here: with the same settings, events of a few hundred bytes stream with no "
            "delay; only events near or above the busy-buffers size are held. A check with small "
            "test events passes while tool calls and images lag."),
        scaled=(Scaled("event size", f"{BIG_EVENT_BYTES // 1000} KB", "tool-call arguments, base64 images"),),
        sources=(f"{DOCS}#proxy_buffering", f"{DOCS}#proxy_buffers", f"{DOCS}#proxy_busy_buffers_size"),
    ),
]
