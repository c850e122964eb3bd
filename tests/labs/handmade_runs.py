"""Hand-made runs of every catalogue scenario: what its symptom looks like, what its cure looks
like, and (where the scenario applies a stress) a cure, or a symptom, that happened without it.

The catalogue test feeds them to each scenario's checks, so a check that accepts everything, or
nothing, is found in milliseconds instead of in a guard. Times follow the scenario's own pacing
(`Shapes` reads the variant's knobs), as the runs the lab measures do.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from labs.catalogue import apps
from labs.catalogue import client as client_layer
from labs.catalogue import apache, browser, cdn, envoy, haproxy, kubernetes, nginx, reload, server, traefik
from labs.scenario.checks.cache import REQUESTS_OK
from labs.scenario.checks.stress import DISCONNECTS
from labs.client.results import Event, StreamResult
from labs.scenario.model import Run, Scenario, VariantName
from labs.scenario.browser_spec import BrowserStreamResult

ACTIVE = "streamlab_active_streams"
TOKENS = "streamlab_tokens_generated_total"


class Shapes:
    """Streams shaped like what the lab measures, at the pace of one variant of a scenario."""

    def __init__(self, scenario: Scenario, variant: VariantName) -> None:
        self.scenario, self.variant = scenario, variant
        lab = dict(scenario.variant(variant).lab)
        self.lab = lab
        knobs = scenario.workload.knobs(lab)
        self.dt = 1.0 / float(knobs["tokens_per_s"])
        self.due = scenario.workload.first_due_s(lab)
        self.script = str(knobs["script"])

    def times(self, n: int = 20, pause_after: int | None = None, pause_s: float = 0.0,
              dt: float | None = None) -> list[float]:
        """When each of `n` tokens arrives when it is due (one silence of `pause_s` after
        `pause_after` tokens)."""
        step = self.dt if dt is None else dt
        return [self.due + 0.01 + step * i + (pause_s if pause_after is not None and i >= pause_after else 0.0)
                for i in range(n)]

    def stream(self, times: list[float], read_of: list[int] | None = None, **fields: Any) -> StreamResult:
        """A complete stream ([DONE], 200) whose content events came at `times` (in socket reads
        `read_of`: one each by default)."""
        reads = read_of or list(range(1, len(times) + 1))
        hop_s = fields.pop("hop_s", None)
        hops = hop_s if isinstance(hop_s, list) else [hop_s] * len(times)
        events = [Event(t=t, read=r, kind="content", text="x", hop_s=h) for t, r, h in zip(times, reads, hops)]
        end = fields.pop("end_s", times[-1] + 0.005 if times else 0.005)
        defaults: dict[str, Any] = dict(
            outcome="complete", saw_done=True, status=200, text=self.script, finish_reason="stop",
            ttft_s=times[0] if times else None, e2e_s=end, end_s=end, reads=len(set(reads)))
        return StreamResult(events=events, **{**defaults, **fields})

    def streamed(self, n: int = 20, pause_after: int | None = None, pause_s: float = 0.0,
                 **fields: Any) -> StreamResult:
        """Every token in a read of its own, when it is due."""
        return self.stream(self.times(n, pause_after, pause_s), **fields)

    def rushed(self, n: int = 20, **fields: Any) -> StreamResult:
        """Every token in a read of its own, but all within milliseconds: not the workload's pace."""
        return self.stream(self.times(n, dt=0.001), **fields)

    def grouped(self, n: int = 20, size: int = 3, **fields: Any) -> StreamResult:
        """Events leave in groups of `size`, each group when its last token was made: each
        event's hop delay is its wait for the group's end (HAProxy without http-no-delay, measured
        at 10 tok/s: 200, 100 and 5 ms)."""
        due = self.times(n)
        ends = [due[min(n - 1, (i // size) * size + size - 1)] for i in range(n)]
        return self.stream(ends, [1 + i // size for i in range(n)],
                           hop_s=[end - t + 0.005 for end, t in zip(ends, due)], **fields)

    def lump(self, n: int = 20, **fields: Any) -> StreamResult:
        """Held: every event in one read when the last token was made."""
        end = self.times(n)[-1]
        return self.stream([end] * n, [1] * n, **fields)

    def rushed_lump(self, n: int = 20, **fields: Any) -> StreamResult:
        """One lump, but of tokens made all at once: nothing was held."""
        return self.stream([self.due + 0.02] * n, [1] * n, **fields)

    def cut(self, k: int, after_s: float, outcome: str = "truncated", **fields: Any) -> StreamResult:
        """`k` tokens when due, then the stream ends `after_s` later without [DONE]."""
        times = self.times(k)
        end = (times[-1] if times else 0.0) + after_s
        result = self.stream(times, outcome=outcome, saw_done=False, end_s=end, finish_reason=None, **fields)
        result.e2e_s = times[-1] if times else None
        result.text = self.script[: k * 3]
        return result

    def left(self, k: int = 3, **fields: Any) -> StreamResult:
        """The client closed the socket after `k` tokens, on purpose."""
        times = self.times(k)
        return self.stream(times, outcome="disconnected", saw_done=False, disconnect_s=times[-1],
                           end_s=times[-1], finish_reason=None, **fields)

    def refused(self, outcome: str = "reset", status: int | None = None, at: float = 0.01) -> StreamResult:
        return StreamResult(outcome=outcome, status=status, start_s=at, end_s=0.005, saw_done=False)

    def run(self, *results: StreamResult, **fields: Any) -> Run:
        return Run(variant=self.variant, workload=self.scenario.workload, results=list(results),
                   lab=self.lab, **fields)


def at(result: StreamResult, start_s: float) -> StreamResult:
    return replace(result, start_s=start_s)


def in_turn(results: list[StreamResult]) -> list[StreamResult]:
    """The streams, each sent after the one before had ended: no load at all."""
    placed, start = [], 0.0
    for result in results:
        placed.append(at(result, start))
        start += (result.end_s or 0.0) + 0.01
    return placed


def one_by_one(shapes: Shapes, make: Callable[[], StreamResult], count: int) -> list[StreamResult]:
    return in_turn([make() for _ in range(count)])


# ---- the scenarios' shapes -----------------------------------------------------------------------
# Each entry: (symptom run, cured run, cured run without the stress, symptom run without it);
# the last two are None where the scenario applies no stress beyond its pacing.
Make = Callable[[Shapes], Run]


@dataclass(frozen=True)
class Handmade:
    symptom: Make
    cure: Make
    cure_without_stress: Make | None = None
    symptom_without_stress: Make | None = None


def _held(encoding: str | None = None) -> Handmade:
    """A buffering scenario: a lump at the end against tokens as they are made."""
    return Handmade(
        symptom=lambda s: s.run(s.lump(content_encoding=encoding)),
        cure=lambda s: s.run(s.streamed()),
        cure_without_stress=lambda s: s.run(s.rushed()),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(content_encoding=encoding)))


def _idle(timeout_s: float, outcome: str = "truncated", pause_after: int = 5) -> Handmade:
    """An idle timeout: the stream is cut after `timeout_s` of the model's silence."""
    return Handmade(
        symptom=lambda s: s.run(s.cut(pause_after, timeout_s + 0.02, outcome=outcome)),
        cure=lambda s: s.run(s.streamed(pause_after=pause_after, pause_s=3.0, heartbeats=12)),
        cure_without_stress=lambda s: s.run(s.streamed(heartbeats=12)),
        symptom_without_stress=lambda s: s.run(s.cut(pause_after, 0.02, outcome=outcome)))


def _departure(release_s: float, generated: float, heard: float) -> Handmade:
    """One client leaves after 3 tokens; the server keeps generating (symptom) or stops (cure)."""
    return Handmade(
        symptom=lambda s: s.run(s.left(), server_delta={TOKENS: generated}, release_s=release_s),
        cure=lambda s: s.run(s.left(), server_delta={TOKENS: 4, DISCONNECTS: heard}, release_s=0.01),
        cure_without_stress=lambda s: s.run(s.streamed(), server_delta={TOKENS: 20}, release_s=0.01),
        symptom_without_stress=lambda s: s.run(s.streamed(), server_delta={TOKENS: generated},
                                               release_s=release_s))


def _load(total: int, served: int, refused: Callable[[Shapes], StreamResult], gauge: str, peak: float,
          **symptom_fields: Any) -> Handmade:
    """`total` requests at once: `served` of them stream, the rest are refused (symptom), or all
    stream and the server's `gauge` peaks at `peak` (cure)."""
    def symptom(s: Shapes) -> Run:
        ok = [at(s.streamed(15), 0.001 * i) for i in range(served)]
        return s.run(*ok, *(refused(s) for _ in range(total - served)), **symptom_fields)

    def symptom_alone(s: Shapes) -> Run:  # the same failures, but one request at a time
        streams = [s.streamed(15) for _ in range(served)] + [refused(s) for _ in range(total - served)]
        return s.run(*in_turn(streams), **symptom_fields)
    return Handmade(
        symptom=symptom,
        cure=lambda s: s.run(*(at(s.streamed(15), 0.001 * i) for i in range(total)), peaks={gauge: peak}),
        cure_without_stress=lambda s: s.run(*one_by_one(s, lambda: s.streamed(15), total),
                                            peaks={gauge: 1}),
        symptom_without_stress=symptom_alone)


def _waves(s: Shapes) -> Run:
    """haproxy-maxconn: the first `maxconn` stream at once, the rest start one stream later."""
    first = [at(s.streamed(15), 0.001 * i) for i in range(haproxy.MAXCONN)]
    e2e = first[0].e2e_s or 0.0
    later = [at(s.stream([t + e2e for t in s.times(15)]), 0.03) for _ in range(50 - haproxy.MAXCONN)]
    return s.run(*first, *later)


def _chain(culprit: str | None) -> Make:
    """A bisected chain: entering at the culprit hop or in front of it, the stream is a lump."""
    def make(s: Shapes) -> Run:
        path = s.scenario.path
        held_until = path.index(culprit) if culprit else -1
        # A running hop is named `kind:port`, whatever its name on the path (`nginx:inner`).
        hops = {f"{i + 1}. enter at {name.split(':')[0]}:{4000 + i}": [s.lump() if i <= held_until else s.streamed()]
                for i, name in enumerate(path)}
        hops[f"{len(hops) + 1}. direct to the server"] = [s.streamed()]
        return s.run(next(iter(hops.values()))[0], hops=hops)
    return make


def in_browser(result: StreamResult, **measured: Any) -> BrowserStreamResult:
    """`result` as Chromium measured it, with what only the browser knows (split chunks,
    EventSource connections and their Last-Event-ID)."""
    return BrowserStreamResult(**{**{f.name: getattr(result, f.name) for f in fields(StreamResult)}, **measured})


def _decoded(naive: bool, splits: int) -> Make:
    """browser-textdecoder: every split character's two halves become U+FFFD when each chunk is
    decoded alone (naive), or the script exactly (streaming decode); `splits` chunks ended
    mid-character (0: the server never split one)."""
    def make(s: Shapes) -> Run:
        text = "".join("\ufffd\ufffd" if i < splits else c for i, c in enumerate(s.script)) if naive else s.script
        return s.run(in_browser(s.streamed(len(s.script)), text=text, split_reads=splits, decoder=
                                "naive" if naive else "stream"))
    return make


def _reconnects(ids: bool, connections: int) -> Make:
    """browser-eventsource-reconnect: the server drops each connection after 5 tokens. Without
    ids each reconnection starts the answer again (and is dropped again) until the page gives up;
    with ids the browser sends Last-Event-ID and gets the rest, once."""
    def make(s: Shapes) -> Run:
        cut = s.script[:20]
        if ids:
            sent = [None] + [str(5 * n) for n in range(1, connections)]
            result = s.streamed(len(s.script.split()), text=s.script)
        else:
            sent = [None] * connections
            result = s.cut(5 * connections, 0.01)
            result.text = cut * connections
        return s.run(in_browser(result, api="eventsource", connections=connections, last_event_ids=sent))
    return make


def _tabs(protocol: str, queued: int) -> Make:
    """browser-connection-limit: seven streams requested at once; over HTTP/1.1 the browser sends
    six and the seventh waits for one to end (`queued`: how many wait)."""
    def make(s: Shapes) -> Run:
        count = s.scenario.workload.streams
        first = [at(s.streamed(15, http_version=protocol), 0.001 * i) for i in range(count - queued)]
        e2e = first[0].e2e_s or 0.0
        later = [at(s.stream([t + e2e for t in s.times(15)], http_version=protocol, e2e_s=e2e * 2,
                             end_s=e2e * 2), 0.001 * (count - queued)) for _ in range(queued)]
        return s.run(*first, *later)
    return make


def _stop_texts(met: str, partial: str) -> Make:
    return lambda s: s.run(s.streamed(6, text=met), s.streamed(18, text=partial))


def _worker_timeout(cut_after: int) -> Make:
    """gunicorn-sync-timeout: `cut_after` tokens, then the worker is killed (and says so)."""
    said = ["gunicorn:3000 log: [2026-12-01 08:00:00 +0000] [1] [CRITICAL] WORKER TIMEOUT (pid:2)"]
    return lambda s: s.run(s.cut(cut_after, 0.5), evidence=said)


def _gateway(symptom: bool, silence_s: float) -> Make:
    """litellm-heartbeats: the server pings all along; the client sees them (cure) or not."""
    pings = {"streamlab_heartbeats_total": 12}
    if symptom:
        return lambda s: s.run(s.cut(5, silence_s), server_delta=pings)
    return lambda s: s.run(s.streamed(pause_after=5, pause_s=silence_s, heartbeats=12), server_delta=pings)


CHUNKED = {"transfer-encoding": "chunked"}
SIZED = {"content-length": "6000"}  # a body a hop read whole before it sent it
UNDICI_CUT = "TypeError: terminated (UND_ERR_BODY_TIMEOUT, Body Timeout Error)"
MOJIBAKE = "鬱蒼とした森で\ufffd野家の🦩と\ufffd\ufffdが踊る。"


def _retried(statuses: tuple[int, ...], abandoned: int) -> Make:
    """retry-amplification: the slow prompt's status, then the two ordinary requests' (502: every
    peer disabled), and how many times the server saw the slow prompt arrive and be abandoned."""
    def make(s: Shapes) -> Run:
        results = [s.refused("http-error", status, at=2.0) if status != 200 else s.streamed(5)
                   for status in statuses]
        return s.run(*results, server_delta={nginx.ABANDONED: abandoned})
    return make


def _raced(failed: int, connections: int) -> Make:
    """upstream-keepalive-race: 144 short requests, `failed` of them 502 from the proxy (never
    seen by the server), over `connections` upstream connections."""
    def make(s: Shapes) -> Run:
        results = [s.refused("http-error", 502) if i < failed else s.streamed(3) for i in range(nginx.RACE_REQUESTS)]
        served = nginx.RACE_REQUESTS - failed
        return s.run(*results, server_delta={nginx.CONNECTIONS: connections, REQUESTS_OK: served})
    return make


def _mesh_raced(failed: int, connections: int) -> Make:
    """mesh-sidecar-pair: as _raced, the 503s the inbound sidecar's (UC, its cluster's count of
    connections the server closed under a request), over HTTP/2 between the sidecars."""
    def make(s: Shapes) -> Run:
        run = _raced(failed, connections)(s)
        for i in range(failed):
            run.results[i] = s.refused("http-error", 503)
        run.server_delta[REQUESTS_OK] = nginx.RACE_REQUESTS - failed
        run.proxy_stats = {"envoy:1": {"cluster.upstream.upstream_cx_http2_total": 1},
                           "envoy:2": {"cluster.upstream.upstream_cx_destroy_remote_with_active_rq": failed}}
        return run
    return make


def _reload() -> Handmade:
    """A reload mid-stream: the stream is cut when the drain limit ends (symptom), or runs to its
    end (cure); without the stress, no reload happened at all."""
    at = reload.RELOAD_AT_S

    def cut(s: Shapes) -> StreamResult:
        return s.cut(int(reload.CUT_AT_S / s.dt), 0.05)
    return Handmade(
        symptom=lambda s: s.run(cut(s), reloaded_at_s=at),
        cure=lambda s: s.run(s.streamed(60), reloaded_at_s=at),
        cure_without_stress=lambda s: s.run(s.streamed(60)),
        symptom_without_stress=lambda s: s.run(cut(s)))


def _waiting_list() -> Handmade:
    """Two users on one URL, the second 0.5 s later: it waits for the first's headers, then its
    own prefill (symptom), or both start after one prefill (cure); without the stress the two
    never overlap."""
    def late(s: Shapes) -> StreamResult:
        return at(s.stream([t + cdn.PREFILL_S - cdn.SECOND_AFTER_S for t in s.times(14)]), cdn.SECOND_AFTER_S)
    return Handmade(
        symptom=lambda s: s.run(s.streamed(14), late(s)),
        cure=lambda s: s.run(s.streamed(14), at(s.streamed(14), cdn.SECOND_AFTER_S)),
        cure_without_stress=lambda s: s.run(*in_turn([s.streamed(14), s.streamed(14)])),
        symptom_without_stress=lambda s: s.run(*in_turn([s.streamed(14), late(s)])))


HANDMADE: dict[str, Handmade] = {
    "nginx-buffering": _held(),
    "nginx-accel-header": _held(),
    "nginx-gzip": _held(encoding="gzip"),
    "nginx-read-timeout": _idle(nginx.READ_TIMEOUT_S),
    "nginx-client-abort": _departure(release_s=2.0, generated=40, heard=1),
    "nginx-worker-connections": _load(60, nginx.STREAMS_PER_WORKER - 2, lambda s: s.refused(), ACTIVE, 60),
    "nginx-upstream-keepalive": Handmade(
        symptom=lambda s: s.run(*one_by_one(s, s.streamed, nginx.KEEPALIVE_REQUESTS),
                                server_delta={"streamlab_http_connections_total": nginx.KEEPALIVE_REQUESTS}),
        cure=lambda s: s.run(*one_by_one(s, s.streamed, nginx.KEEPALIVE_REQUESTS), server_delta={
            "streamlab_http_connections_total": 1,
            'streamlab_requests_total{status="200"}': nginx.KEEPALIVE_REQUESTS}),
        # Nothing reached the server (the requests were answered elsewhere): no connection either.
        cure_without_stress=lambda s: s.run(*one_by_one(s, s.streamed, nginx.KEEPALIVE_REQUESTS))),
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
        symptom=_raced(8, 68), cure=_raced(0, 9),
        # No pool at all: a new connection per request, so no request met the race.
        cure_without_stress=_raced(0, 144),
        # 502s while every request used one connection: something else failed them.
        symptom_without_stress=_raced(8, 9)),
    "mesh-sidecar-pair": Handmade(
        symptom=_mesh_raced(6, 110), cure=_mesh_raced(0, 145),
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
}
