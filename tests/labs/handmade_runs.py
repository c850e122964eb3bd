"""Hand-made runs of every catalogue scenario: what its symptom looks like, what its cure looks
like, and (where the scenario applies a stress) a cure, or a symptom, that happened without it.

The catalogue test feeds them to each scenario's checks, so a check that accepts everything, or
nothing, is found in milliseconds instead of in a guard. Times follow the scenario's own pacing
(`Shapes` reads the variant's knobs), as the runs the lab measures do.
"""
from __future__ import annotations

from labs.catalogue import agents, apps, relays, responses
from labs.catalogue import client as client_layer
from labs.catalogue import apache, browser, cdn, envoy, haproxy, kubernetes, nginx, nginx_upstream, server, traefik, waf
from labs.scenario.checks.cache import REQUESTS_OK
from labs.scenario.checks.stress import DISCONNECTS
from tests.labs.handmade_makers import (CHUNKED, MOJIBAKE, SIZED, UNDICI_CUT, _agent_cut, _agent_fallback,
                                        _chain, _counted, _decoded, _departure, _failure_held, _gateway, _held, _idle,
                                        _load, _mesh_raced, _pseudo_streamed, _raced, _reconnects, _reload,
                                        _resumed, _retried, _stop_texts, _tabs, _waiting_list, _waves,
                                        _worker_timeout, in_browser)
from tests.labs.handmade_shapes import ACTIVE, TOKENS, Handmade, Shapes, at, in_turn, one_by_one

__all__ = ["HANDMADE", "Handmade", "Shapes"]


# The think before the first token, with the server pinging: nothing reached the client until
# nginx cut (symptom), or the pings and then every token did (cure); without the think (the first
# token at once) the cure faced no silence, and a cut at once is no idle timeout's. The same on
# every protocol (relay-iter-raw, relay-messages-iter-raw).
ITER_RAW_RELAY = Handmade(
    symptom=lambda s: s.run(s.cut(0, relays.RELAY_IDLE_TIMEOUT_S + 0.003),
                            server_delta={"streamlab_heartbeats_total": 7}),
    cure=lambda s: s.run(s.streamed(heartbeats=15), server_delta={"streamlab_heartbeats_total": 15}),
    cure_without_stress=lambda s: s.run(s.stream([0.01 + s.dt * i for i in range(20)], heartbeats=15),
                                        server_delta={"streamlab_heartbeats_total": 15}),
    symptom_without_stress=lambda s: s.run(s.cut(0, 0.02), server_delta={"streamlab_heartbeats_total": 1}))


# ModSecurity's error-log lines for the lab's log-only rules: it read the prompt and the stream
# (the broken variant), or the prompt alone (the fixed one).
def _waf_said(*rules: int) -> list[str]:
    return [f'apache:1 log: [security2:error] ModSecurity: Warning. [id "{rule}"] [msg "lab"]' for rule in rules]


WAF_READ_BOTH = _waf_said(waf.READ_REQUEST_RULE, waf.READ_RESPONSE_RULE)
WAF_READ_PROMPT = _waf_said(waf.READ_REQUEST_RULE)


HANDMADE: dict[str, Handmade] = {
    "nginx-buffering": _held(),
    "nginx-accel-header": _held(),
    "nginx-gzip": _held(encoding="gzip"),
    "nginx-read-timeout": _idle(nginx.READ_TIMEOUT_S),
    "nginx-client-abort": _departure(release_s=2.0, generated=40, heard=1),
    "nginx-worker-connections": _load(60, nginx.STREAMS_PER_WORKER - 2, lambda s: s.refused(), ACTIVE, 60),
    "nginx-upstream-keepalive": Handmade(
        symptom=lambda s: s.run(*one_by_one(s, s.streamed, nginx_upstream.KEEPALIVE_REQUESTS),
                                server_delta={"streamlab_http_connections_total": nginx_upstream.KEEPALIVE_REQUESTS}),
        cure=lambda s: s.run(*one_by_one(s, s.streamed, nginx_upstream.KEEPALIVE_REQUESTS), server_delta={
            "streamlab_http_connections_total": 1,
            'streamlab_requests_total{status="200"}': nginx_upstream.KEEPALIVE_REQUESTS}),
        # Nothing reached the server (the requests were answered elsewhere): no connection either.
        cure_without_stress=lambda s: s.run(*one_by_one(s, s.streamed, nginx_upstream.KEEPALIVE_REQUESTS))),
    "haproxy-nodelay": Handmade(
        symptom=lambda s: s.run(s.grouped()),
        cure=lambda s: s.run(s.streamed(hop_s=0.002)),
        cure_without_stress=lambda s: s.run(s.rushed(hop_s=0.002))),
    "haproxy-compression": Handmade(
        symptom=lambda s: s.run(s.streamed(content_encoding="gzip", hop_s=0.1)),
        cure=lambda s: s.run(s.streamed(hop_s=0.002)),
        cure_without_stress=lambda s: s.run(s.rushed(hop_s=0.002))),
    "haproxy-timeout-server": _idle(haproxy.TIMEOUT_SERVER_S),
    "haproxy-abortonclose": _departure(release_s=1.9, generated=8, heard=1),
    "haproxy-maxconn": Handmade(
        symptom=_waves,
        symptom_without_stress=lambda s: s.run(*in_turn(_waves(s).results)),
        cure=lambda s: s.run(*(at(s.streamed(15), 0.001 * i) for i in range(50)), peaks={ACTIVE: 50}),
        cure_without_stress=lambda s: s.run(*one_by_one(s, lambda: s.streamed(15), 50), peaks={ACTIVE: 1})),
    "envoy-route-timeout": Handmade(
        symptom=lambda s: s.run(s.cut(int(envoy.ROUTE_TIMEOUT_S / s.dt), 0.01),
                                proxy_stats={"envoy:1": {"cluster.lab.upstream_rq_timeout": 1}}),
        cure=lambda s: s.run(s.streamed(30, heartbeats=12)),
        cure_without_stress=lambda s: s.run(s.streamed(10, heartbeats=4)),
        symptom_without_stress=lambda s: s.run(
            s.cut(3, 0.01), proxy_stats={"envoy:1": {"cluster.lab.upstream_rq_timeout": 1}})),
    "envoy-stream-idle": _idle(envoy.STREAM_IDLE_TIMEOUT_S),
    "gateway-total-deadline": Handmade(
        symptom=lambda s: s.run(s.cut(int(kubernetes.REQUEST_TIMEOUT_S / s.dt), 0.01)),
        cure=lambda s: s.run(s.streamed(30, heartbeats=12)),
        cure_without_stress=lambda s: s.run(s.streamed(10, heartbeats=4)),
        symptom_without_stress=lambda s: s.run(s.cut(3, 0.01))),
    "ingress-read-timeout": _idle(kubernetes.READ_TIMEOUT_S),
    "envoy-circuit-breaker": _load(
        20, envoy.MAX_REQUESTS + envoy.MAX_PENDING, lambda s: s.refused("http-error", 503), ACTIVE, 20,
        proxy_stats={"envoy:1": {"cluster.lab.upstream_rq_pending_overflow": 8}}),
    "envoy-body-inspection": _held(),
    "waf-body-inspection": Handmade(
        symptom=lambda s: s.run(s.lump(), evidence=WAF_READ_BOTH),
        cure=lambda s: s.run(s.streamed(), evidence=WAF_READ_PROMPT),
        cure_without_stress=lambda s: s.run(s.rushed(), evidence=WAF_READ_PROMPT),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(), evidence=WAF_READ_BOTH)),
    "envoy-token-accounting": _counted("counted", "tokens"),
    "chain-buffering": Handmade(symptom=_chain("nginx"), cure=_chain(None)),
    # The wrong culprit (the CDN in front) must fail the symptom: only Caddy's entry holds.
    "chain-edge-compression": Handmade(symptom=_chain("caddy"), cure=_chain(None),
                                       symptom_without_stress=_chain("varnish")),
    # The inner nginx holding the stream is another fault: the symptom names the outer one.
    "chain-accel-consumed": Handmade(symptom=_chain("nginx"), cure=_chain(None),
                                     symptom_without_stress=_chain("nginx:inner")),
    "server-disconnect": Handmade(
        symptom=lambda s: s.run(
            *(s.left() for _ in range(server.DISCONNECT_SLOTS)),
            *(s.stream([3.0 + t for t in s.times(4)]) for _ in range(server.DISCONNECT_SLOTS)),
            server_delta={TOKENS: 276, "streamlab_slot_held_after_disconnect_seconds_sum": 12.0,
                          "streamlab_slot_held_after_disconnect_seconds_count": 4}),
        cure=lambda s: s.run(
            *(s.left() for _ in range(server.DISCONNECT_SLOTS)),
            *(s.streamed(4) for _ in range(server.DISCONNECT_SLOTS)),
            server_delta={TOKENS: 28, DISCONNECTS: 4, "streamlab_slot_held_after_disconnect_seconds_sum": 0.01,
                          "streamlab_slot_held_after_disconnect_seconds_count": 4}),
        cure_without_stress=lambda s: s.run(*(s.streamed(4) for _ in range(2 * server.DISCONNECT_SLOTS)),
                                            server_delta={TOKENS: 32}),
        # Slow newcomers and work for nobody, but nobody left: some other load made them.
        symptom_without_stress=lambda s: s.run(
            *(s.streamed(65) for _ in range(server.DISCONNECT_SLOTS)),
            *(s.stream([3.0 + t for t in s.times(4)]) for _ in range(server.DISCONNECT_SLOTS)),
            server_delta={TOKENS: 600, "streamlab_slot_held_after_disconnect_seconds_sum": 12.0,
                          "streamlab_slot_held_after_disconnect_seconds_count": 4})),
    "server-blocking-loop": Handmade(
        symptom=lambda s: s.run(*(s.streamed() for _ in range(7)), s.stream([t + s.dt for t in s.times()])),
        cure=lambda s: s.run(*(s.streamed() for _ in range(server.BLOCKING_STREAMS))),
        cure_without_stress=lambda s: s.run(*one_by_one(s, s.streamed, server.BLOCKING_STREAMS)),
        symptom_without_stress=lambda s: s.run(
            *one_by_one(s, s.streamed, 7), at(s.stream([t + s.dt for t in s.times()]), 100.0))),
    "server-gzip-middleware": _held(encoding="gzip"),
    "server-detokenizer": Handmade(symptom=lambda s: s.run(s.streamed(text="東京で\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd")),
                                   cure=lambda s: s.run(s.streamed())),
    "server-stop-holdback": Handmade(
        symptom=_stop_texts(server.STOP_MET_VISIBLE + "\n\nUser", server.STOP_PARTIAL_VISIBLE),
        cure=_stop_texts(server.STOP_MET_VISIBLE, server.STOP_PARTIAL_VISIBLE)),
    "server-heartbeat": Handmade(
        symptom=lambda s: s.run(s.cut(0, server.HEARTBEAT_PROXY_TIMEOUT_S + 0.02)),
        cure=lambda s: s.run(s.streamed(heartbeats=12)),
        cure_without_stress=lambda s: s.run(s.stream([0.01 + s.dt * i for i in range(20)], heartbeats=12)),
        symptom_without_stress=lambda s: s.run(s.cut(0, 0.02))),
    "server-midstream-error": Handmade(
        symptom=lambda s: s.run(s.streamed(5, text=s.script[:20]),
                                server_delta={'streamlab_requests_aborted_total{reason="error"}': 1}),
        cure=lambda s: s.run(s.streamed(5, outcome="error-in-band", error="engine failed", finish_reason=None),
                             server_delta={"streamlab_inband_errors_total": 1})),
    "server-coalescing": Handmade(
        symptom=lambda s: s.run(*(s.streamed(120) for _ in range(32)), server_delta={
            TOKENS: 32 * 120, "streamlab_stream_writes_total": 32 * 121}),
        cure=lambda s: s.run(*(s.stream([0.01 + 0.025 * (i // 12) for i in range(120)], [1 + i // 12 for i in range(120)])
                               for _ in range(32)),
                             server_delta={TOKENS: 32 * 120, "streamlab_stream_writes_total": 32 * 11})),
    "server-fd-limit": _load(160, 120, lambda s: s.refused(), "process_open_fds", 180),
    "client-read-body": Handmade(
        symptom=lambda s: s.run(s.lump(reads=20)),
        cure=lambda s: s.run(s.streamed()),
        cure_without_stress=lambda s: s.run(s.rushed()),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(reads=20))),
    "client-read-timeout": _idle(client_layer.READ_TIMEOUT_S, outcome="timeout"),
    "browser-textdecoder": Handmade(
        symptom=_decoded(naive=True, splits=4), cure=_decoded(naive=False, splits=4),
        # The stress is the split itself: a chunk that never ends mid-character proves nothing.
        cure_without_stress=_decoded(naive=False, splits=0),
        symptom_without_stress=lambda s: s.run(in_browser(s.streamed(), text="\ufffd" + s.script))),
    "browser-eventsource-reconnect": Handmade(
        symptom=_reconnects(ids=False, connections=3), cure=_reconnects(ids=True, connections=2),
        # The stress is the drop: one connection that was never dropped, and an answer that
        # repeats its own start without any reconnection.
        cure_without_stress=_reconnects(ids=True, connections=1),
        symptom_without_stress=lambda s: s.run(in_browser(
            s.streamed(), text=browser.RECONNECT_START * 2, api="eventsource", connections=1,
            last_event_ids=[None]))),
    "browser-connection-limit": Handmade(
        symptom=_tabs("http/1.1", queued=1), cure=_tabs("h2", queued=0),
        # The stress is seven streams at once: the page asked for them one after another.
        cure_without_stress=lambda s: s.run(*in_turn(_tabs("h2", queued=0)(s).results)),
        symptom_without_stress=lambda s: s.run(*in_turn(_tabs("http/1.1", queued=1)(s).results))),
    "express-compression": _held(encoding="gzip"),
    "express-proxy-abort": _departure(release_s=3.0, generated=60, heard=1),
    "nextjs-rewrites": _held(encoding="gzip"),
    "dev-proxy-buffering": _held(encoding="gzip"),
    "corp-inspecting-proxy": _held(),
    "jupyter-proxy-accept": Handmade(
        symptom=lambda s: s.run(s.lump(headers=SIZED)),
        cure=lambda s: s.run(s.streamed(headers=CHUNKED)),
        cure_without_stress=lambda s: s.run(s.rushed(headers=CHUNKED)),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(headers=SIZED))),
    "proxy-response-hook": Handmade(
        symptom=lambda s: s.run(s.lump(headers=SIZED)),
        cure=lambda s: s.run(s.streamed(headers=CHUNKED)),
        cure_without_stress=lambda s: s.run(s.rushed(headers=CHUNKED)),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(headers=SIZED))),
    "gunicorn-sync-timeout": Handmade(
        symptom=_worker_timeout(int(apps.GUNICORN_TIMEOUT_S * 10)),
        cure=lambda s: s.run(s.streamed(60)),
        cure_without_stress=lambda s: s.run(s.streamed(20)),  # over before the timeout could fire
        symptom_without_stress=_worker_timeout(3)),  # cut at once: not the worker timeout
    "django-stream-iterator": Handmade(
        symptom=lambda s: s.run(s.lump(), evidence=[f"django:3000 log: Warning: {apps.DJANGO_WARNING} in order"]),
        cure=lambda s: s.run(s.streamed()),
        cure_without_stress=lambda s: s.run(s.rushed()),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(), evidence=[f"django:3000 log: Warning: {apps.DJANGO_WARNING}"])),
    "litellm-heartbeats": Handmade(
        symptom=_gateway(True, apps.GATEWAY_IDLE_TIMEOUT_S + 0.02), cure=_gateway(False, 4.0),
        cure_without_stress=lambda s: s.run(s.streamed(heartbeats=12),
                                            server_delta={"streamlab_heartbeats_total": 12}),
        symptom_without_stress=_gateway(True, 0.02)),
    "client-requests-iter-lines": Handmade(
        symptom=lambda s: s.run(s.streamed(hop_s=s.dt)),
        cure=lambda s: s.run(s.streamed(hop_s=0.002)),
        # On a chunked answer the library is not put to the test.
        cure_without_stress=lambda s: s.run(s.streamed(hop_s=0.002, headers=CHUNKED)),
        symptom_without_stress=lambda s: s.run(s.streamed(hop_s=s.dt, headers=CHUNKED))),
    "client-naive-parser": Handmade(
        symptom=lambda s: s.run(s.streamed(43, text=MOJIBAKE, reads=600)),
        cure=lambda s: s.run(s.streamed(43, reads=600)),
        # One read per event: the parser never met a cut.
        cure_without_stress=lambda s: s.run(s.streamed(43)),
        symptom_without_stress=lambda s: s.run(s.streamed(43, text=MOJIBAKE))),
    "client-undici-timeout": Handmade(
        symptom=lambda s: s.run(s.cut(5, client_layer.UNDICI_BODY_TIMEOUT_S + 0.02, outcome="timeout",
                                      error=UNDICI_CUT)),
        cure=lambda s: s.run(s.streamed(pause_after=5, pause_s=3.5)),
        cure_without_stress=lambda s: s.run(s.streamed()),
        # Cut at once, for another reason than the silence.
        symptom_without_stress=lambda s: s.run(s.cut(5, 0.02, outcome="timeout", error=UNDICI_CUT))),
    "client-line-limit": Handmade(
        symptom=lambda s: s.run(s.cut(0, 0.02, error="LineTooLong: 400, message: Got more than 524288 bytes")),
        cure=lambda s: s.run(s.streamed(14, body_bytes=14 * 1_050_000)),
        # Small events: nothing put the line reader to the test.
        cure_without_stress=lambda s: s.run(s.streamed(14, body_bytes=14 * 300)),
        # Cut for another reason: the server went away.
        symptom_without_stress=lambda s: s.run(s.cut(0, 0.02, error="ServerDisconnectedError: Server disconnected"))),


    "cdn-cache-replay": Handmade(
        symptom=lambda s: s.run(s.streamed(), s.stream([0.0003] * 20, [1] * 20), server_delta={REQUESTS_OK: 1}),
        cure=lambda s: s.run(s.streamed(), s.streamed(), server_delta={REQUESTS_OK: 2})),
    "cdn-between-bytes": _idle(cdn.BETWEEN_BYTES_S),
    "cdn-waiting-list": _waiting_list(),
    "apache-proxy-timeout": _idle(apache.PROXY_TIMEOUT_S),
    "caddy-encode": _held(encoding="gzip"),
    "traefik-buffering": _held(),
    "traefik-write-timeout": Handmade(
        symptom=lambda s: s.run(s.cut(int(traefik.WRITE_TIMEOUT_S / s.dt), 0.01)),
        cure=lambda s: s.run(s.streamed(30, heartbeats=12)),
        cure_without_stress=lambda s: s.run(s.streamed(10, heartbeats=4)),
        symptom_without_stress=lambda s: s.run(s.cut(3, 0.01))),
    "nginx-reload": _reload(),
    "haproxy-reload": _reload(),
    "retry-amplification": Handmade(
        symptom=_retried((504, 502, 502), 2), cure=_retried((504, 200, 200), 1),
        # nginx's timeout never fired: the slow prompt was answered (a cure that faced nothing).
        cure_without_stress=_retried((200, 200, 200), 0),
        # The same statuses, but the server saw the prompt once: no retry happened.
        symptom_without_stress=_retried((504, 502, 502), 1)),
    "upstream-keepalive-race": Handmade(
        symptom=_raced(16, 136), cure=_raced(0, 9),
        # No pool at all: a new connection per request, so no request met the race.
        cure_without_stress=_raced(0, 288),
        # 502s while every request used one connection: something else failed them.
        symptom_without_stress=_raced(16, 9)),
    "mesh-sidecar-pair": Handmade(
        symptom=_mesh_raced(6, 110), cure=_mesh_raced(0, 217),
        # The pool was reused all along and nothing raced: the fix proved nothing.
        cure_without_stress=_mesh_raced(0, 9),
        # 503s while the server closed no idle connection: something else failed them.
        symptom_without_stress=_mesh_raced(6, 9)),
    "nginx-buffer-size": Handmade(
        symptom=lambda s: s.run(s.streamed(hop_s=0.1)),
        cure=lambda s: s.run(s.streamed(hop_s=0.002)),
        cure_without_stress=lambda s: s.run(s.rushed(hop_s=0.002))),
    # Headers held until the first DATA frame, against headers at once through the same silence;
    # without the silence (first token at once) prompt headers prove nothing.
    "nginx-http2-headers": Handmade(
        symptom=lambda s: s.run(s.streamed(http_version="2", headers_s=s.due + 0.01)),
        cure=lambda s: s.run(s.streamed(http_version="2", headers_s=0.005)),
        cure_without_stress=lambda s: s.run(s.stream([0.01 + s.dt * i for i in range(20)],
                                                     http_version="2", headers_s=0.005)),
        symptom_without_stress=lambda s: s.run(s.stream([0.01 + s.dt * i for i in range(20)],
                                                        http_version="2", headers_s=s.due))),
    "relay-iter-raw": ITER_RAW_RELAY,
    "relay-messages-iter-raw": ITER_RAW_RELAY,
    # The gateway held its headers through the think: nginx answered 504 at its timeout (symptom),
    # or the gateway's own pings reached the client through the same think (cure).
    "gateway-drops-ping": Handmade(
        symptom=lambda s: s.run(s.cut(0, relays.GATEWAY_IDLE_TIMEOUT_S + 0.05, outcome="http-error", status=504),
                                server_delta={"streamlab_heartbeats_total": 7}),
        cure=lambda s: s.run(s.streamed(heartbeats=4), server_delta={"streamlab_heartbeats_total": 15}),
        cure_without_stress=lambda s: s.run(s.stream([0.01 + s.dt * i for i in range(20)], heartbeats=4),
                                            server_delta={"streamlab_heartbeats_total": 15}),
        # A 504 at once: no timeout of the silence's.
        symptom_without_stress=lambda s: s.run(s.cut(0, 0.02, outcome="http-error", status=504),
                                               server_delta={"streamlab_heartbeats_total": 1})),
    # A 200 and no event the SDK takes, though the server generated the answer (symptom); the
    # exact text (cure); an empty answer because nothing was generated is another fault.
    "proxy-strips-event-lines": Handmade(
        symptom=lambda s: s.run(s.stream([], outcome="truncated", saw_done=False, text="", end_s=2.06),
                                server_delta={"streamlab_tokens_generated_total": 21, REQUESTS_OK: 1}),
        cure=lambda s: s.run(s.streamed(), server_delta={"streamlab_tokens_generated_total": 21, REQUESTS_OK: 1}),
        symptom_without_stress=lambda s: s.run(s.stream([], outcome="truncated", saw_done=False, text=""),
                                               server_delta={REQUESTS_OK: 1})),
    "codex-idle-timeout": _agent_cut(agents.PROXY_TIMEOUT_S, agents.THINK_S, agents.CODEX_RETRIES,
                                     "ERROR: stream disconnected before completion: Transport error"),
    "claude-code-event-lines": _agent_fallback(),
    "responses-terminal-event": _failure_held(responses.IDLE_BOUND_S),
    "responses-resume": _resumed(responses.RESPONSES_STREAMED),
    "nginx-cache-resume": _resumed(responses.RESPONSES_STREAMED),
    "responses-pseudo-stream": _pseudo_streamed(responses.RESPONSES_STREAMED, responses.RESPONSES_WHOLE),
}
