"""nginx scenarios: buffering, buffer sizes, the accel header, gzip, read timeout, client abort,
connections, keepalive."""
from __future__ import annotations

from labs.scenario.exposing import CLOSE_DELIMITED
from labs.scenario import checks
from labs.catalogue.common import MANY_STREAMS_SERVER
from labs.catalogue.drivers import one_after_another, paced_at_the_cut
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
KEEPALIVE_REQUESTS = 20  # nginx-upstream-keepalive
# retry-amplification: the read timeout, and the silence before the headers that outlasts it (a
# prefill or a queue on a server that answers with its first token).
RETRY_READ_TIMEOUT_S = 1.0
RETRY_PREFILL_S = 1.6
ABANDONED = 'streamlab_requests_total{status="499"}'  # the server's count of requests left before an answer
# upstream-keepalive-race: the server's keep-alive (standing for uvicorn's 5 s), requests paced
# at 5 to 1 ms before it in 0.5 ms steps (the race's window: measured idle, 18 of 144 answered 502
# there, at -3..-1 ms mostly), and how many. A loaded machine blurs the client's timing and the
# rate falls: with two busy loops on the 2 cores, 2 of 144 (1.4 %); a fresh-clone CI run once saw
# 0 of 144 with the earlier window (6 ms before to 2 ms after). At 1.4 % a run of 288 shows none
# with chance 0.986**288 = 1.7 %; idle it is nil.
RACE_KEEPALIVE_S = 0.25
RACE_OFFSETS_S = tuple((-5.0 + 0.5 * step) / 1000 for step in range(9))
RACE_REQUESTS = 288
CONNECTIONS = "streamlab_http_connections_total"
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
        broken=Variant(server_args=CLOSE_DELIMITED_SERVER, lab=NO_ACCEL_HEADER),
        fix=Variant(lab={"omit_headers": []}),
        symptom_checks=(checks.finding("buffering"),),
        cure_checks=(checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("buffering")),
        explanation=(
            "The same nginx defaults as nginx-buffering, but the fix is on the server: a response "
            "header `X-Accel-Buffering: no` tells nginx to stop buffering this one response. It is the "
            "fix for proxies you cannot configure (a managed ingress), and costs nothing elsewhere."),
        finding=(
            "Measured here: whether the server leaves the header out for every response "
            "(`--omit-header X-Accel-Buffering`) or for one request (`lab.omit_headers`), nginx gets "
            "the same bytes in the same writes and holds them alike (32 events at 10/s: 3 reads, TTFT "
            "1,403-1,421 ms on both engines). What decides whether the missing header hurts is the reply's framing: "
            "close-delimited (the lab's `--http h11`), held; chunked (uvicorn's default httptools), "
            "forwarded chunk by chunk (TTFB 2-3 ms) with or without the header."),
        fix_summary="the server sends `X-Accel-Buffering: no` with every streaming response",
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
        broken=Variant(proxy={"nginx": {"proxy_ignore_client_abort": True}},
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
            "a server that handles disconnects stops within one decode step."),
        fix_summary="proxy_ignore_client_abort off; (the default)",
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
        name="nginx-upstream-keepalive",
        layer="proxy",
        symptom="every request pays a new upstream connection (and TIME_WAIT piles up)",
        path=("nginx",),
        workload=Workload(streams=KEEPALIVE_REQUESTS, sequential=True, tokens_per_s=200.0,
                          script="A token stream should reach the reader."),
        broken=Variant(proxy={"nginx": {"proxy_buffering": False}}),
        fix=Variant(proxy={"nginx": {"upstream_keepalive": 16, "upstream_keepalive_timeout": "4s",
                                     **STREAMING_UPSTREAM}}),
        symptom_checks=(checks.server_metric_at_least(
            "streamlab_http_connections_total", KEEPALIVE_REQUESTS,
            f"one upstream connection per request (>= {KEEPALIVE_REQUESTS} for {KEEPALIVE_REQUESTS})"),),
        cure_checks=(checks.server_metric_at_most(
            "streamlab_http_connections_total", 2,
            f"upstream connections reused (<= 2 for {KEEPALIVE_REQUESTS} requests)"),
            checks.server_metric_at_least(
                'streamlab_requests_total{status="200"}', KEEPALIVE_REQUESTS,
                f"the server served all {KEEPALIVE_REQUESTS} requests (over the reused connections)"),
            checks.complete_with_done()),
        server_metrics=("streamlab_http_connections_total", 'streamlab_requests_total{status="200"}'),
        explanation=(
            "Without an upstream keepalive pool nginx opens a new TCP connection to the server for every "
            "request and closes it after the response. A pool needs all three: `keepalive N` in the "
            "upstream block, `proxy_http_version 1.1`, and an empty Connection header (nginx sends "
            "`Connection: close` otherwise). Keep the pool's idle timeout below the server's own "
            "keep-alive timeout (uvicorn: 5 s), or nginx reuses connections the server is closing."),
        fix_summary='upstream { keepalive 16; } + proxy_http_version 1.1; + proxy_set_header Connection "";',
        sources=("https://nginx.org/en/docs/http/ngx_http_upstream_module.html#keepalive",),
    ),
    Scenario(
        name="retry-amplification",
        layer="proxy",
        symptom="one slow prompt keeps two replicas busy, its user gets a 504, and everyone after "
                "gets 502 for ten seconds",
        path=("nginx",),
        # One slow prompt, then two ordinary requests, one after another.
        workload=Workload(streams=3, sequential=True, tokens_per_s=50.0,
                          driver=one_after_another({"lab": {"headers_delay_s": RETRY_PREFILL_S}}, {}, {})),
        broken=Variant(proxy={"nginx": {"upstream_peers": 2, "proxy_read_timeout": f"{RETRY_READ_TIMEOUT_S:g}s",
                                        "proxy_next_upstream": ("error", "timeout", "non_idempotent")}}),
        fix=Variant(proxy={"nginx": {"proxy_next_upstream": ("error", "timeout")}}),
        symptom_checks=(checks.statuses_are(504, 502, 502),
                        checks.server_metric_at_least(ABANDONED, 2, "the server's records: the one POST "
                                                      "arrived twice, each abandoned at nginx's timeout")),
        cure_checks=(checks.statuses_are(504, 200, 200),
                     checks.server_metric_at_most(ABANDONED, 1, "the server's records: the POST arrived once"),
                     checks.server_metric_at_least(ABANDONED, 1, "and nginx's timeout did fire on it")),
        server_metrics=(ABANDONED, "streamlab_http_connections_total"),
        explanation=(
            "nginx retries a failed request on the next server of its upstream block for the "
            "failures `proxy_next_upstream` names (`error timeout` by default), but since 1.9.13 never "
            "a POST that already reached a server, unless `non_idempotent` is added, which configs copied "
            "for GET APIs often carry. A chat completion is a POST whose prefill (or queue) can outlast "
            "`proxy_read_timeout` before the headers: nginx gives up on the first replica, which keeps "
            "prefilling until it sees the connection close, sends the same prompt to the second, and "
            "answers 504 when that one is as slow. Every retry is a whole prefill on another GPU, for "
            "an answer nobody reads. Worse, a timeout counts as a failure of the peer: with `max_fails=1` "
            "(the default) each timed-out server is taken out for `fail_timeout` (10 s), so the retry "
            "takes out every replica, and every request in the next 10 s gets 502 (\"no live "
            "upstreams\"). Keep `non_idempotent` out, and size the timeout above the longest prefill "
            "(or let the server send its headers at once)."),
        fix_summary="proxy_next_upstream error timeout; (nginx's default: never non_idempotent), and "
                    "proxy_read_timeout above the longest prefill",
        finding=(
            "Measured here (nginx 1.22.1, the lab's one server listed twice in the upstream block, "
            "a 1.6 s wait before the headers, proxy_read_timeout 1s): with `non_idempotent` the POST "
            "reached the server twice (the access log: upstream_status=504, 504, request_time 2.0 s) "
            "and the next three ordinary requests got 502 within 62 ms each; without it, one attempt "
            "(504 after 1.0 s) and the next three got 200 from the other peer. The lab's server "
            "waits before admitting the request, so no tokens were generated for the abandoned "
            "attempts here; on a server that prefills before its headers each attempt is a prefill."),
        scaled=(Scaled("nginx proxy_read_timeout", f"{RETRY_READ_TIMEOUT_S:g}s", "60s (nginx's default)"),
                Scaled("silence before the headers", f"{RETRY_PREFILL_S:g}s",
                       "a long prompt's prefill or a queue, on a server that answers with its first token")),
        sources=(f"{DOCS}#proxy_next_upstream", "https://nginx.org/en/docs/http/ngx_http_upstream_module.html#server"),
    ),
    Scenario(
        name="upstream-keepalive-race",
        layer="proxy",
        symptom="now and then a chat request gets a 502 that the app's log never shows",
        path=("nginx",),
        base="fixed",  # a pool of upstream connections idle for up to 4 s
        workload=Workload(streams=RACE_REQUESTS, sequential=True, tokens_per_s=200.0,
                          script="A short answer.",
                          driver=paced_at_the_cut(RACE_REQUESTS, RACE_KEEPALIVE_S, RACE_OFFSETS_S)),
        broken=Variant(server_args=("--keep-alive-s", f"{RACE_KEEPALIVE_S:g}")),
        fix=Variant(server_args=("--keep-alive-s", "75")),  # the lab server's default
        symptom_checks=(checks.status_seen(502), checks.unseen_by_server(502),
                        checks.server_metric_at_least(CONNECTIONS, RACE_REQUESTS // 4,
                                                      "the server closed idle connections under nginx's pool")),
        cure_checks=(checks.complete_with_done(),
                     # One per nginx worker's pool, and the lab's own reads of the metrics.
                     checks.server_metric_at_most(CONNECTIONS, RACE_REQUESTS // 12,
                                                  "the requests at the broken server's cut reused "
                                                  "pooled connections")),
        server_metrics=(CONNECTIONS, 'streamlab_requests_total{status="200"}'),
        explanation=(
            "A proxy that pools upstream connections (nginx `keepalive`, Traefik, Envoy, every cloud "
            "load balancer) reuses one that has been idle for up to its own idle timeout. When the "
            "server's keep-alive timeout is shorter (uvicorn's and Node's default is 5 s; nginx pools "
            "for 60 s by default, ingress-nginx 60 s, Traefik 90 s), a request that arrives just as "
            "the server closes an idle connection is written into a socket the server is shutting: "
            "nginx reads a reset or an early close (`upstream prematurely closed connection`, "
            "`recv() failed (104: Connection reset by peer)`) and answers 502. The server never saw "
            "the request, so its log shows nothing. nginx retries a GET on the next connection but "
            "not a POST it already sent (it may have reached the server), and a chat completion is a "
            "POST. Keep the server's keep-alive above the proxy's upstream idle timeout, or the "
            "proxy's below the server's."),
        fix_summary="uvicorn --timeout-keep-alive 75 (above the proxy's pool idle), or nginx upstream "
                    "keepalive_timeout below the server's",
        finding=(
            "Measured here (nginx 1.22.1 pooling for 4 s, the server's keep-alive at 1 s and at "
            "0.25 s, one POST at a time sent a few ms before the server's timer): 6 of 130 and 9 of "
            "120 requests answered 502, all in the 4 ms before the server's cut (30 % of those sent "
            "2 ms before it), none after it; nginx logged `recv() failed (104: Connection reset by "
            "peer)` and `upstream prematurely closed connection while reading response header`. With "
            "the server's keep-alive at 75 s: 0 of 120, and 9 upstream connections for the 120 (68 with "
            "the server's at 0.25 s: it had closed the idle ones). The same 144 sent as GET (the "
            "server's EventSource form): 0 answered 502, while nginx logged the same `recv() failed "
            "(104)` and `upstream prematurely closed` lines for them: it sent each GET again on a "
            "new connection, and the POSTs of the same run got 11 of 144. Sent at 5 to 1 ms before the "
            "server's timer (0.5 ms steps), 18 of 144 answered 502 on an idle machine and 2 of 144 "
            "with two busy loops on its 2 cores: hence the 288 requests."),
        scaled=(Scaled("the server's keep-alive timeout", f"{RACE_KEEPALIVE_S:g}s",
                       "5s (uvicorn's default) under a proxy that pools for 60s"),
                Scaled("requests at the cut", f"{RACE_REQUESTS}, paced to the server's timer",
                       "thousands a day, some of which land on the cut by chance")),
        sources=("https://nginx.org/en/docs/http/ngx_http_upstream_module.html#keepalive_timeout",
                 "https://www.uvicorn.org/settings/#timeouts",
                 f"{DOCS}#proxy_next_upstream"),
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
