"""nginx towards its upstream: connections pooled (or not), a request retried on another peer, a
pooled connection raced by the server's own idle close."""
from __future__ import annotations

from labs.scenario import checks
from labs.catalogue.drivers import one_after_another, paced_at_the_cut
from labs.catalogue.nginx import DOCS, STREAMING_UPSTREAM
from labs.scenario.model import Scaled, Scenario, Since, Variant, Workload

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

SCENARIOS = [
    Scenario(
        name="nginx-upstream-keepalive",
        layer="proxy",
        symptom="every request pays a new upstream connection (and TIME_WAIT piles up)",
        path=("nginx",),
        workload=Workload(streams=KEEPALIVE_REQUESTS, sequential=True, tokens_per_s=200.0,
                          script="A token stream should reach the reader."),
        # The WebSocket snippet's `map $http_upgrade $connection_upgrade { '' close; }` sends this
        # on every ordinary request.
        broken=Variant(proxy={"nginx": {"proxy_buffering": False, "proxy_http_version": "1.1",
                                        "proxy_connection_header": "close"}}),
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
            "Without an upstream keepalive pool, or with `Connection: close` sent upstream, nginx opens "
            "a new TCP connection to the server for every request and closes it after the response. "
            "Before nginx 1.29.7 that is the default, and a pool needs all three: `keepalive N` in the "
            "upstream block, `proxy_http_version 1.1`, and an empty Connection header. Since 1.29.7 "
            "(1.30 stable) every upstream block pools (`keepalive 32 local`) over HTTP/1.1 without "
            "`Connection: close`, so a plain config reuses connections; what still defeats the pool "
            "is a header that says close, such as the WebSocket snippet's `Connection "
            "$connection_upgrade` whose map turns a request without Upgrade into `close` (the broken "
            "variant here). Keep the pool's idle timeout below the server's own keep-alive timeout "
            "(uvicorn: 5 s), or nginx reuses connections the server is closing."),
        fix_summary='proxy_set_header Connection ""; (before nginx 1.29.7 also upstream { keepalive 16; } '
                    'and proxy_http_version 1.1;)',
        since=(Since("nginx", "1.29.7", "every upstream block pools connections over HTTP/1.1 by "
                     "default: only a `Connection: close` still opens one per request"),),
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
]
