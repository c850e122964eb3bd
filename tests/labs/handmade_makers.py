"""The makers of the hand-made runs' shapes that several scenarios share (held, cut at a
timeout, left, loaded, raced...), and the bits of text and headers they carry."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable

from labs.catalogue import cdn, haproxy, mesh, nginx_upstream, reload
from labs.scenario.checks.cache import REQUESTS_OK
from labs.scenario.checks.stress import DISCONNECTS
from labs.client.agent_streams import AgentResult
from labs.client.results import Event, StreamResult
from labs.scenario.model import Run
from labs.scenario.browser_spec import BrowserStreamResult
from tests.labs.handmade_shapes import TOKENS, Handmade, Make, Shapes, at, in_turn, one_by_one


def _held(encoding: str | None = None) -> Handmade:
    """A buffering scenario: a lump at the end against tokens as they are made."""
    return Handmade(
        symptom=lambda s: s.run(s.lump(content_encoding=encoding)),
        cure=lambda s: s.run(s.streamed()),
        cure_without_stress=lambda s: s.run(s.rushed()),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(content_encoding=encoding)))


def _counted(held_by: str, streamed_by: str, tokens: int = 20) -> Handmade:
    """Token accounting: the broken counter holds the stream, the fixed one streams, each writing
    its count into the access log (`held_by=N`, `streamed_by=N`) beside the client's usage. The
    counterfeits: a count that misses a token (an event lost across chunks) or never arrives."""
    usage = {"completion_tokens": tokens}

    def logged(field: str, count: int | str) -> dict[str, list[str]]:
        return {"envoy:1": [f"status=200 flags=- {field}={count}"]}
    return Handmade(
        symptom=lambda s: s.run(s.lump(usage=usage), access_log=logged(held_by, tokens)),
        cure=lambda s: s.run(s.streamed(usage=usage), access_log=logged(streamed_by, tokens)),
        symptom_without_stress=lambda s: s.run(s.lump(usage=usage), access_log=logged(held_by, "-")),
        cure_without_stress=lambda s: s.run(s.streamed(usage=usage), access_log=logged(streamed_by, tokens - 1)))


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
        return s.run(*results, server_delta={nginx_upstream.ABANDONED: abandoned})
    return make


def _raced(failed: int, connections: int, count: int = nginx_upstream.RACE_REQUESTS) -> Make:
    """upstream-keepalive-race: `count` short requests, `failed` of them 502 from the proxy (never
    seen by the server), over `connections` upstream connections."""
    def make(s: Shapes) -> Run:
        results = [s.refused("http-error", 502) if i < failed else s.streamed(3) for i in range(count)]
        served = count - failed
        return s.run(*results, server_delta={nginx_upstream.CONNECTIONS: connections, REQUESTS_OK: served})
    return make


def _mesh_raced(failed: int, connections: int) -> Make:
    """mesh-sidecar-pair: as _raced, the 503s the inbound sidecar's (UC, its cluster's count of
    connections the server closed under a request), over HTTP/2 between the sidecars."""
    def make(s: Shapes) -> Run:
        run = _raced(failed, connections, mesh.RACE_REQUESTS)(s)
        for i in range(failed):
            run.results[i] = s.refused("http-error", 503)
        run.server_delta[REQUESTS_OK] = mesh.RACE_REQUESTS - failed
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


def _agent_cut(timeout_s: float, think_s: float, retries: int, error: str) -> Handmade:
    """A coding agent behind an idle timeout (labs/catalogue/agents.py): each try cut in the think
    before any token, the agent retrying, then failing (symptom); one try through the think with
    pings, the script printed (cure). Without the stress: a try that failed at once, not in a
    silence; a cure with neither a think nor a ping."""
    requests = 'streamlab_api_requests_total{api="responses",stream="true"}'

    def agent(s: Shapes, returncode: int, gone_s: float | None, first_s: float | None, **fields: Any) -> AgentResult:
        record = {"outcome": "complete" if gone_s is None else "client-gone", "client_gone_after_s": gone_s,
                  "first_token_after_s": first_s}
        return AgentResult(url="http://127.0.0.1:9/v1/responses", mode="agent:codex", returncode=returncode,
                           record=record, **fields)

    def failed(s: Shapes, gone_s: float) -> Run:
        return s.run(agent(s, 1, gone_s, None, outcome="error-in-band", error=error, retries=retries),
                     server_delta={requests: 1 + retries})

    def passed(s: Shapes, first_s: float, pings: int) -> Run:
        return s.run(agent(s, 0, None, first_s, outcome="complete", text=s.script),
                     server_delta={requests: 1, "streamlab_heartbeats_total": pings})
    return Handmade(symptom=lambda s: failed(s, timeout_s + 0.01), cure=lambda s: passed(s, think_s + 0.01, 11),
                    cure_without_stress=lambda s: passed(s, 0.01, 0),
                    symptom_without_stress=lambda s: failed(s, 0.01))


def _agent_fallback() -> Handmade:
    """A coding agent that asks again without streaming when the stream failed it
    (claude-code-event-lines): a streamed and an unstreamed request for one prompt, the answer
    right (symptom), against one streamed request (cure)."""
    def requests(stream: str) -> str:
        return f'streamlab_api_requests_total{{api="messages",stream="{stream}"}}'

    def answered(s: Shapes, unstreamed: int) -> Run:
        result = AgentResult(url="http://127.0.0.1:9/v1/messages", mode="agent:claude-code", returncode=0,
                             outcome="complete", text=s.script)
        return s.run(result, server_delta={requests("true"): 1, requests("false"): unstreamed})
    return Handmade(symptom=lambda s: answered(s, 1), cure=lambda s: answered(s, 0))
# ---- the Responses API's scenarios (labs/catalogue/responses.py) ---------------------------------
def _failure(s: Shapes, open_after_s: float) -> StreamResult:
    """Five tokens, then `response.failed`; the connection ends `open_after_s` after it."""
    result = s.cut(5, 0.005 + open_after_s, outcome="error-in-band", error="engine failed")
    result.events.append(Event(t=result.events[-1].t + 0.005, read=6, kind="error", text="engine failed"))
    result.e2e_s = result.events[-1].t
    return result


def _failure_held(idle_bound_s: float) -> Handmade:
    """A failure event held open until the client's idle bound (symptom) or closed with it (cure);
    without the failure at all, a complete stream, neither."""
    return Handmade(
        symptom=lambda s: s.run(_failure(s, idle_bound_s + 0.002)),
        cure=lambda s: s.run(_failure(s, 0.001)),
        cure_without_stress=lambda s: s.run(s.streamed()),
        symptom_without_stress=lambda s: s.run(s.streamed()))


def _resumed(streamed_metric: str) -> Handmade:
    """A stream cut after 6 tokens, then two resumes of it: live both (cure), or the second
    replayed whole from a cache (symptom); without the cut, one whole stream and nothing to resume."""
    def cut(s: Shapes) -> StreamResult:
        result = s.cut(6, 0.005)
        result.text = s.script[:22]
        return result

    def resumed(s: Shapes, replayed: bool = False) -> StreamResult:
        result = s.stream([0.0003] * 15, [1] * 15) if replayed else s.streamed(15)
        result.text = s.script[22:]
        return result
    return Handmade(
        symptom=lambda s: s.run(cut(s), resumed(s), resumed(s, replayed=True), server_delta={streamed_metric: 2}),
        cure=lambda s: s.run(cut(s), resumed(s), resumed(s), server_delta={streamed_metric: 3}),
        cure_without_stress=lambda s: s.run(s.streamed(), server_delta={streamed_metric: 3}),
        symptom_without_stress=lambda s: s.run(s.streamed(), server_delta={streamed_metric: 1}))


def _pseudo_streamed(streamed_metric: str, whole_metric: str) -> Handmade:
    """The gateway asked the upstream without streaming and sent the answer in one lump at the end
    (symptom), or streamed it (cure); a run made all at once shows neither."""
    return Handmade(
        symptom=lambda s: s.run(s.lump(), server_delta={whole_metric: 1}),
        cure=lambda s: s.run(s.streamed(), server_delta={streamed_metric: 1}),
        cure_without_stress=lambda s: s.run(s.rushed(), server_delta={streamed_metric: 1}),
        symptom_without_stress=lambda s: s.run(s.rushed_lump(), server_delta={whole_metric: 1}))
