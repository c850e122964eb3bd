"""The trials: what verify sends through the user's path, in front of the lab's server, and whose
judge reads each answer (`labs.findings`: verify decides no fault itself).

The server behaves the way that exposes faults: every request asks it for labs.lab.exposing
(no `X-Accel-Buffering: no`, no heartbeats), and it answers HTTP/1.0 close-delimited. The
baseline of the streaming trials is the same request sent straight to the server, and every trial
hands its judge what it depends on (the silence kept, the stream's asked length, the pause after
the departure), so a judge can say when a trial proved nothing.
"""
from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable

from labs import client
from labs.client.alpn import negotiate
from labs.client.apis import DEFAULT_API, client_api
from labs.client.apis.base import Prompt
from labs.client.results import StreamResult
from labs.findings import (Evidence, FindingKind, Pacing, UnusableInput, Verdict, buffering, coalescing,
                           compression, connection_limit, departure, idle_timeout, total_timeout)
from labs.findings.evidence import ended, events_per_read
from labs.lab import exposing
from labs.lab.server import DEFAULT_SCRIPT, wait_idle
from labs.verify.early_cut import Retried, early_cut, reported
from labs.verify.measured import Measured, measured, not_run
from labs.verify.model import ROUTE_PATH, Options
from server.launcher import ServerHandle

PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
TOKENS_PER_S = 10.0  # pacing of the streaming trials: one interval is 0.1 s
INTERVAL_S = 1.0 / TOKENS_PER_S
DISCONNECT_TOKENS_PER_S = 20.0
# The silence right after the client leaves: HAProxy without abortonclose, httpd and Varnish
# notice a departure only at their next write to the client, which the silence delays.
DISCONNECT_PAUSE_S = 2.0
STREAM_TOKENS = 12  # events of the streaming trials: 1.2 s, well inside one 4 KB nginx buffer
_DIRECT: dict[str, StreamResult] = {}  # the direct baseline, once per lab server


def paced_like(direct: StreamResult, interval_s: float = INTERVAL_S) -> Pacing:
    """The baseline: the same request straight to the lab's server, at the trials' pace."""
    return Pacing(direct.ttft_s or 0.0, interval_s)


@dataclass
class Target:
    """Where the trials send requests: the path's entry and the lab's server behind it."""

    url: str
    server: ServerHandle
    model: str
    options: Options
    headers: dict[str, str] = field(default_factory=dict)
    path: str = ROUTE_PATH  # the route's path at the entry (the server answers it under any prefix)
    direct: StreamResult | None = None  # the same stream straight to the server
    # With heartbeats (--heartbeat), the one at which the path's proxy passes a departure on.
    heartbeats_to_notice: int = 1
    # Streams through the entry cut just after they started, each measured again (early_cut.py).
    retried: list[Retried] = field(default_factory=list)
    api: str = DEFAULT_API  # the wire protocol of every trial's request (labs/client/apis)

    def body(self, lab: dict[str, Any] | None = None, *, prompt: Prompt = PROMPT, max_tokens: int = 1024,
             **request: Any) -> dict[str, Any]:
        fields = {"script": DEFAULT_SCRIPT, "tokens_per_s": TOKENS_PER_S, **exposing.EXPOSING,
                  **(lab or {})}
        return client_api(self.api).body(self.model, prompt, max_tokens, fields, **request)

    async def measure(self, body: dict[str, Any], *, url: str | None = None, **options: Any) -> StreamResult:
        options.setdefault("headers", self.headers)
        options.setdefault("accept_encoding", None)
        options.setdefault("verify_tls", False)  # a TLS entry here serves the run's own self-signed pair
        options.setdefault("api", self.api)
        # Straight to the server (the baseline), the API's own path; through the entry, the route's.
        target = url + client_api(self.api).path if url else self.url + self.path
        result = await client.measure_stream(target, body, **options)
        return result if url else await self.again_if_cut(result, body, **options)

    async def again_if_cut(self, result: StreamResult, body: dict[str, Any], **options: Any) -> StreamResult:
        """A stream through the entry cut just after it started is measured once more, so the
        trial's judge reads a whole stream; the cut is reported all the same
        (early_cut.reported, from run_trial)."""
        if not early_cut(result):
            return result
        again = await client.measure_stream(self.url + self.path, body, **options)
        self.retried.append(Retried(result, again))
        return again


async def direct_baseline(target: Target) -> StreamResult:
    if target.direct is None:
        target.direct = _DIRECT.get(target.server.url)
    if target.direct is None:
        target.direct = await target.measure(target.body(max_tokens=STREAM_TOKENS), url=target.server.url,
                                             headers={})
        _DIRECT[target.server.url] = target.direct
    return target.direct


def judge_streaming(result: StreamResult, direct: StreamResult) -> Measured:
    """Buffering first (a held stream is also grouped), then coalescing, on one stamped stream."""
    evidence = Evidence([result], paced_like(direct))
    held = buffering.judge(evidence)
    if held.fault:
        return measured("streaming", "buffering", held, [result])
    grouped = coalescing.judge(evidence)
    if grouped.fault or grouped.untold:
        return measured("streaming", "coalescing", grouped, [result])
    return Measured("streaming", True, f"{held.observed}; {grouped.observed}", results=[result])


async def judge_stamped(target: Target, result: StreamResult, direct: StreamResult, **options: Any) -> Measured:
    """The stamped stream judged; one grouped too soon to tell (coalescing.grouped_too_soon) is
    measured once more, and the second judged."""
    judged = judge_streaming(result, direct)
    if not coalescing.grouped_too_soon(result, paced_like(direct)):
        return judged
    again = await target.measure(target.body({"stamp": True}, max_tokens=STREAM_TOKENS), **options)
    if again.outcome != "complete":
        return judged
    second = judge_streaming(again, direct)
    second.observed = (f"{second.observed} (a second stream: the first grouped "
                       f"{events_per_read(result):.1f} events a read without the hop delay)")
    return second


async def streaming(target: Target) -> Measured:
    direct = await direct_baseline(target)
    result = await target.measure(target.body({"stamp": True}, max_tokens=STREAM_TOKENS))
    if early_cut(result):  # cut on both tries: the path cuts streams it serves (told by run_trial)
        return Measured("streaming", False, f"the stream was cut: {ended(result)}", results=[result])
    if result.outcome != "complete":
        # The lab's server is up and the stream is short: the config does not serve the chat
        # route here (a redirect to HTTPS, an IP allow-list, a route the reading got wrong).
        snippet = f": {result.body_snippet[:200]}" if result.body_snippet else ""
        location = result.headers.get("location")
        raise UnusableInput(f"the config does not serve POST {target.path} here: {ended(result)}"
                            + (f" (Location: {location})" if location else "") + snippet)
    return await judge_stamped(target, result, direct)


async def streaming_h2(target: Target) -> Measured:
    """Browsers and most SDKs speak HTTP/2 to a TLS entry that offers it, and a hop may stream one
    protocol and hold the other: the same stamped stream over HTTP/2, read by the same judges."""
    if not target.url.startswith("https://"):
        return not_run("streaming-h2", "a plain-HTTP listener: HTTP/2 is measured over TLS (ALPN) only")
    chosen, said = await negotiate(target.url, verify=False)
    if chosen != "h2":
        return not_run("streaming-h2", f"{said}: no HTTP/2 here")
    direct = await direct_baseline(target)
    result = await target.measure(target.body({"stamp": True}, max_tokens=STREAM_TOKENS), http2=True)
    if result.outcome != "complete":
        return Measured("streaming-h2", False, f"over HTTP/2: {ended(result)}", results=[result],
                        skipped=f"the stream over HTTP/2 did not complete ({ended(result)})")
    judged = await judge_stamped(target, result, direct, http2=True)
    judged.name, judged.observed = "streaming-h2", f"over HTTP/2: {judged.observed}"
    return judged


def judge_gzip(result: StreamResult, direct: StreamResult) -> Measured:
    """Origin and client share this machine's clock: the hop delay is read as it is."""
    return measured("gzip", "compression-delay",
                    compression.judge(Evidence([result], paced_like(direct))), [result])


# Compressors decide at the first write whether a response is worth compressing: Caddy's encode
# above 512 bytes, Traefik's compress above 1,024. Small events may pass uncompressed or not,
# depending on how many of them the first read holds (load decides that), so a path that kept
# small events plain is asked again with every event above the largest of those minimums: a long
# first delta or a tool call, which real answers have. The verdict no longer depends on timing.
LARGE_EVENT_BYTES = 1500


async def gzip(target: Target) -> Measured:
    direct = await direct_baseline(target)
    result = await target.measure(target.body({"stamp": True}, max_tokens=STREAM_TOKENS),
                                  accept_encoding="gzip, deflate")
    small = judge_gzip(result, direct)
    if result.outcome != "complete" or result.content_encoding is not None:
        return small
    large = await target.measure(
        target.body({"stamp": True, "pad_bytes": LARGE_EVENT_BYTES}, max_tokens=STREAM_TOKENS),
        accept_encoding="gzip, deflate")
    if large.outcome != "complete":  # a hop that refuses large events says nothing about gzip
        small.results.append(large)
        small.observed += f"; the stream of {LARGE_EVENT_BYTES:,}-byte events did not complete ({ended(large)})"
        return small
    judged = judge_gzip(large, direct)
    judged.results = [result, large]
    judged.observed = (f"small events passed uncompressed; with events of {LARGE_EVENT_BYTES:,} "
                       f"bytes: {judged.observed}")
    return judged


def _silence_options(silence_s: float) -> dict[str, Any]:
    return {"read_timeout_s": silence_s + 15.0, "total_timeout_s": silence_s + 60.0}


def judge_silence(name: str, result: StreamResult, silence_s: float) -> Measured:
    verdict = idle_timeout.judge(Evidence([result], Pacing(0.0, INTERVAL_S), silence_s=silence_s))
    return measured(name, "idle-timeout", verdict, [result])


async def silence_before_first_token(target: Target) -> Measured:
    silence = target.options.max_silence_s
    script = "Every token should reach the reader."
    result = await target.measure(target.body({"script": script, "headers_delay_s": silence}),
                                  **_silence_options(silence))
    return judge_silence("silence-before-first-token", result, silence)


async def silence_mid_stream(target: Target) -> Measured:
    silence = target.options.max_silence_s
    result = await target.measure(target.body({"pause_after_tokens": 3, "pause_s": silence}),
                                  **_silence_options(silence))
    return judge_silence("silence-mid-stream", result, silence)


def judge_long(result: StreamResult, duration_s: float) -> Measured:
    verdict = total_timeout.judge(Evidence([result], Pacing(0.0, INTERVAL_S), duration_s=duration_s))
    return measured("long-stream", "total-timeout", verdict, [result])


async def long_stream(target: Target) -> Measured:
    # A little past --max-stream, so a limit of exactly that length still shows.
    wanted = target.options.max_stream_s + max(2.0, 0.1 * target.options.max_stream_s)
    tokens = int(math.ceil(wanted * TOKENS_PER_S))
    script = " ".join([DEFAULT_SCRIPT] * (tokens // 8 + 2))
    result = await target.measure(target.body({"script": script}, max_tokens=tokens),
                                  read_timeout_s=30.0, total_timeout_s=wanted + 60.0)
    return judge_long(result, wanted)


def departure_pause_s(heartbeat_s: float | None, heartbeats: int = 1) -> float:
    """The origin's silence right after the client left: 2 s; with heartbeats, the bound they set
    (the heartbeats the proxy needs and the margin) and 2 s more, so a path they do not help still
    shows late."""
    if not heartbeat_s:
        return DISCONNECT_PAUSE_S
    return departure.late_bound(1.0 / DISCONNECT_TOKENS_PER_S, None, heartbeat_s, heartbeats) + DISCONNECT_PAUSE_S


def judge_departure(result: StreamResult, release_s: float | None, heartbeat_s: float | None = None,
                    heartbeats: int = 1) -> Measured:
    """`release_s`: the server's slots went idle this long after the client left (None: not
    within the wait); `heartbeat_s`: the server's heartbeat interval through its pause, of which
    the path's proxy notices at the `heartbeats`-th."""
    verdict = departure.judge(Evidence([result], Pacing(0.0, 1.0 / DISCONNECT_TOKENS_PER_S),
                                       silence_s=departure_pause_s(heartbeat_s, heartbeats), release_s=release_s,
                                       heartbeat_s=heartbeat_s, heartbeats_to_notice=heartbeats))
    return measured("disconnect", "disconnect-not-propagated", verdict, [result])


async def disconnect(target: Target) -> Measured:
    """The client leaves after 3 events; the model is silent 2 s (with --heartbeat: heartbeats at
    that interval through a longer silence), then goes on. Who notices?"""
    server = target.server
    heartbeat, heartbeats = target.options.heartbeat_s, target.heartbeats_to_notice
    pause = departure_pause_s(heartbeat, heartbeats)
    script = " ".join([DEFAULT_SCRIPT] * 6)
    body = target.body({"script": script, "tokens_per_s": DISCONNECT_TOKENS_PER_S, "pause_after_tokens": 4,
                        "pause_s": pause, "heartbeat_s": heartbeat or 0}, max_tokens=60)
    before = server.metrics()
    result = await target.measure(body, disconnect_after_events=3)
    left = time.monotonic()
    release = await asyncio.to_thread(wait_idle, server, pause + 13.0)
    held = release if release is not None else time.monotonic() - left
    after = server.metrics()

    def moved(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)
    nobody = max(0.0, moved("streamlab_tokens_generated_total") - result.content_events)
    trial = judge_departure(result, release, heartbeat, heartbeats)
    trial.observed += (f"; the server held the request {held:.1f} s and generated {nobody:.0f} tokens "
                       f"for nobody (streamlab_tokens_after_disconnect_total "
                       f"+{moved('streamlab_tokens_after_disconnect_total'):.0f})")
    if heartbeat:
        trial.observed += (f"; heartbeats every {heartbeat:g} s through its {pause:g} s silence: "
                           f"{moved('streamlab_heartbeats_total'):.0f} sent (late counted from heartbeat "
                           f"{heartbeats})")
    return trial


def judge_concurrent(results: list[StreamResult]) -> Measured:
    return measured("concurrent-streams", "connection-limit",
                    connection_limit.judge(Evidence(results, Pacing(0.0, INTERVAL_S))), results)


async def concurrent_streams(target: Target) -> Measured:
    count = target.options.streams
    script = " ".join(["A token stream should reach the reader one token at a time."] * 2)
    # One prompt each, as users send: identical requests would meet a cache lock (proxy_cache_lock
    # queues requests with one key) that different prompts never do.
    bodies = [target.body({"script": script}, prompt=f"Stream {i}: {PROMPT[0]['content']}") for i in range(count)]
    options: dict[str, Any] = {"headers": target.headers, "accept_encoding": None, "read_timeout_s": 30.0,
                               "total_timeout_s": 60.0, "verify_tls": False, "api": target.api}
    results = await client.measure_many(target.url + target.path, bodies, count, deadline_s=90.0, **options)
    # A stream cut just after its headers is the early cut (told by run_trial), never a limit on
    # connections: measured again alone, so the connection-limit judge reads whole streams.
    return judge_concurrent([await target.again_if_cut(result, body, **options)
                             for result, body in zip(results, bodies)])


@dataclass(frozen=True)
class Trial:
    """One of verify's checks: its name (`--check NAME`), the finding kinds it can show, how it runs,
    and whether it runs beside the others (only its stream's survival is judged, not its timing)."""

    name: str
    kinds: tuple[FindingKind, ...]
    run: Callable[[Target], Awaitable[Measured]]
    side_by_side: bool = False


# The one table, in the order the checks run and are shown. The side-by-side ones share a wait;
# the others run one at a time, so no other stream disturbs their numbers or the server's counters.
TRIALS: tuple[Trial, ...] = (
    Trial("streaming", ("buffering", "coalescing"), streaming),
    Trial("streaming-h2", ("buffering", "coalescing"), streaming_h2),  # over HTTP/2, where a TLS entry offers it
    Trial("gzip", ("compression-delay",), gzip),
    Trial("silence-before-first-token", ("idle-timeout",), silence_before_first_token, side_by_side=True),
    Trial("silence-mid-stream", ("idle-timeout",), silence_mid_stream, side_by_side=True),
    Trial("long-stream", ("total-timeout",), long_stream, side_by_side=True),
    Trial("disconnect", ("disconnect-not-propagated",), disconnect),
    Trial("concurrent-streams", ("connection-limit",), concurrent_streams),
)
BY_NAME: dict[str, Trial] = {trial.name: trial for trial in TRIALS}
CHECK_KINDS: dict[str, tuple[FindingKind, ...]] = {trial.name: trial.kinds for trial in TRIALS}
CHECK_NAMES = tuple(BY_NAME)


async def run_trial(name: str, target: Target) -> Measured:
    """One trial, its early cuts reported with it (a view of the target of its own collects them:
    the side-by-side trials share the target)."""
    own = replace(target, retried=[])
    return reported(await BY_NAME[name].run(own), own.retried)
