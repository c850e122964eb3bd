"""The dynamic checks: the lab's client measures the user's path in front of the lab's server.

The server behaves the way that exposes faults: it omits `X-Accel-Buffering: no` and answers
HTTP/1.0 close-delimited (`--http h11`); heartbeats are off where a silence is the test. Every
margin is a number of token intervals of the check's own pacing, and every check also proves that
what it depends on happened (the silence was kept, the stream really ran past --max-stream).
"""
from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from labs import client
from labs.findings import FindingKind, UnusableInput
from labs.client.results import StreamResult, percentile
from labs.scenario.model import DEFAULT_SCRIPT
from labs.verify.model import Options
from server.launcher import ServerHandle

PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
TOKENS_PER_S = 10.0  # pacing of the streaming checks: one interval is 0.1 s
INTERVAL_S = 1.0 / TOKENS_PER_S
LATE_INTERVALS = 5.0  # TTFT this many intervals past direct: the path held the first token
LUMP_EVENTS_PER_READ = 3.0  # held events arrive in lumps of at least this many
COALESCED_EVENTS_PER_READ = 1.5
HOP_DELAY_INTERVALS = 0.5  # median event held this long by the path (compression one event late)
DISCONNECT_PAUSE_S = 2.0  # the silence right after the client leaves (HAProxy notices only on a write)
RELEASE_LIMIT_S = 0.5  # ten token intervals of the disconnect check's pacing (20 tokens/s)
STREAM_TOKENS = 12  # events of the streaming checks: 1.2 s, well inside one 4 KB nginx buffer
QUEUED_SHARE = 0.5  # concurrent-streams: a first-token spread of half a stream means streams queued
_DIRECT: dict[str, StreamResult] = {}  # the direct baseline, once per lab server
CHECK_KINDS: dict[str, tuple[FindingKind, ...]] = {
    "streaming": ("buffering", "coalescing"),
    "gzip": ("compression-delay",),
    "silence-before-first-token": ("idle-timeout",),
    "silence-mid-stream": ("idle-timeout",),
    "long-stream": ("total-timeout",),
    "disconnect": ("disconnect-not-propagated",),
    "concurrent-streams": ("connection-limit",),
}
CHECK_NAMES = tuple(CHECK_KINDS)


@dataclass
class Measured:
    """One check's result: passed or not, what it saw, the finding kind when it failed."""

    name: str
    passed: bool
    observed: str
    kind: FindingKind | None = None
    limit_s: float | None = None
    results: list[StreamResult] = field(default_factory=list, repr=False)


@dataclass
class Target:
    """Where the checks send requests: the path's entry and the lab's server behind it."""

    url: str
    server: ServerHandle
    model: str
    options: Options
    headers: dict[str, str] = field(default_factory=dict)
    direct: StreamResult | None = None  # the same stream straight to the server

    def body(self, lab: dict[str, Any] | None = None, **request: Any) -> dict[str, Any]:
        fields = {"script": DEFAULT_SCRIPT, "tokens_per_s": TOKENS_PER_S,
                  "omit_headers": ["X-Accel-Buffering"], **(lab or {})}
        return {"model": self.model, "messages": PROMPT, "stream": True, "max_tokens": 1024,
                **request, "lab": fields}

    async def measure(self, body: dict[str, Any], *, url: str | None = None, **options: Any) -> StreamResult:
        options.setdefault("headers", self.headers)
        options.setdefault("accept_encoding", None)
        return await client.measure_stream((url or self.url) + "/v1/chat/completions", body, **options)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def _per_read(result: StreamResult) -> float:
    return result.content_events / result.bursts if result.bursts else 0.0


def _shape(result: StreamResult) -> str:
    return (f"TTFT {_ms(result.ttft_s)}, E2E {_ms(result.e2e_s)}, {result.content_events} events in "
            f"{result.bursts} reads ({_per_read(result):.1f} per read), {result.outcome}")


def _broken(result: StreamResult) -> str:
    status = f"HTTP {result.status}" if result.status else "no response"
    return f"{status}, {result.outcome}" + (f" ({result.error})" if result.error else "")


async def direct_baseline(target: Target) -> StreamResult:
    if target.direct is None:
        target.direct = _DIRECT.get(target.server.url)
    if target.direct is None:
        target.direct = await target.measure(target.body(max_tokens=STREAM_TOKENS), url=target.server.url,
                                             headers={})
        _DIRECT[target.server.url] = target.direct
    return target.direct


async def streaming(target: Target) -> Measured:
    direct = await direct_baseline(target)
    result = await target.measure(target.body(max_tokens=STREAM_TOKENS))
    if result.outcome != "complete":
        # The lab's server is up and the stream is short: the config does not serve the chat
        # route here (a redirect to HTTPS, an IP allow-list, a route the reading got wrong).
        snippet = f": {result.body_snippet[:200]}" if result.body_snippet else ""
        location = result.headers.get("location")
        raise UnusableInput(f"the config does not serve POST /v1/chat/completions here: {_broken(result)}"
                            + (f" (Location: {location})" if location else "") + snippet)
    late = (result.ttft_s or 0) > (direct.ttft_s or 0) + LATE_INTERVALS * INTERVAL_S
    per_read, direct_per_read = _per_read(result), _per_read(direct)
    observed = f"{_shape(result)}; direct: TTFT {_ms(direct.ttft_s)}, {direct_per_read:.1f} per read"
    if late and per_read >= LUMP_EVENTS_PER_READ:
        return Measured("streaming", False, observed, "buffering", results=[result])
    if per_read >= COALESCED_EVENTS_PER_READ and per_read >= direct_per_read + 0.4:
        return Measured("streaming", False, observed, "coalescing", results=[result])
    return Measured("streaming", True, observed, results=[result])


async def gzip(target: Target) -> Measured:
    direct = await direct_baseline(target)
    result = await target.measure(target.body({"stamp": True}, max_tokens=STREAM_TOKENS),
                                  accept_encoding="gzip, deflate")
    if result.outcome != "complete":
        return Measured("gzip", False, f"with Accept-Encoding gzip the stream did not complete: {_broken(result)}",
                        "compression-delay", results=[result])
    hop = percentile(result.hop_delays, 50)
    encoding = result.content_encoding or "none"
    observed = f"Content-Encoding {encoding}, {_shape(result)}, hop delay p50 {_ms(hop)}"
    late = (result.ttft_s or 0) > (direct.ttft_s or 0) + LATE_INTERVALS * INTERVAL_S
    held = hop is not None and hop >= HOP_DELAY_INTERVALS * INTERVAL_S
    if result.content_encoding and (late or held):
        return Measured("gzip", False, observed, "compression-delay", results=[result])
    return Measured("gzip", True, observed, results=[result])


def _silence_options(silence_s: float) -> dict[str, Any]:
    return {"read_timeout_s": silence_s + 15.0, "total_timeout_s": silence_s + 60.0}


async def silence_before_first_token(target: Target) -> Measured:
    silence = target.options.max_silence_s
    script = "Every token should reach the reader."
    result = await target.measure(target.body({"script": script, "headers_delay_s": silence, "heartbeat_s": 0}),
                                  **_silence_options(silence))
    name = "silence-before-first-token"
    if result.outcome == "complete":
        return Measured(name, True, f"a {silence:g} s silence before the headers: complete, TTFT "
                        f"{_ms(result.ttft_s)}", results=[result])
    cut = result.ttfb_s if result.status and result.status >= 400 else result.end_s
    return Measured(name, False, f"a {silence:g} s silence before the first token: {_broken(result)} after "
                    f"{cut or 0:.1f} s", "idle-timeout", limit_s=_round(cut), results=[result])


async def silence_mid_stream(target: Target) -> Measured:
    silence = target.options.max_silence_s
    result = await target.measure(target.body({"pause_after_tokens": 3, "pause_s": silence, "heartbeat_s": 0}),
                                  **_silence_options(silence))
    name = "silence-mid-stream"
    content = result.content
    if result.outcome == "complete":
        gaps = result.gaps
        kept = max(gaps) if gaps else 0.0
        if kept < silence * 0.9:
            return Measured(name, False, f"the {silence:g} s pause did not happen (longest gap {kept:.1f} s)",
                            results=[result])
        return Measured(name, True, f"a {kept:.1f} s silence after 3 tokens: complete", results=[result])
    last = content[-1].t if content else (result.ttfb_s or 0.0)
    cut = (result.end_s or last) - last
    return Measured(name, False, f"a {silence:g} s silence after {len(content)} tokens: {_broken(result)}, "
                    f"cut {cut:.1f} s into the silence", "idle-timeout", limit_s=_round(cut), results=[result])


async def long_stream(target: Target) -> Measured:
    wanted = target.options.max_stream_s + max(2.0, 0.1 * target.options.max_stream_s)
    tokens = int(math.ceil(wanted * TOKENS_PER_S))
    script = " ".join([DEFAULT_SCRIPT] * (tokens // 8 + 2))
    result = await target.measure(target.body({"script": script}, max_tokens=tokens),
                                  read_timeout_s=30.0, total_timeout_s=wanted + 60.0)
    name = "long-stream"
    if result.outcome == "complete":
        ran = result.e2e_s or 0.0
        if ran < target.options.max_stream_s:
            return Measured(name, False, f"the stream ended after {ran:.1f} s, before --max-stream "
                            f"{target.options.max_stream_s:g} s: nothing was proved", results=[result])
        return Measured(name, True, f"a {ran:.1f} s stream ({result.content_events} events): complete",
                        results=[result])
    last = result.content[-1].t if result.content else result.end_s
    return Measured(name, False, f"a {wanted:.0f} s stream: {_broken(result)}, the last event at {last or 0:.1f} s "
                    f"({result.content_events} of {tokens} events)", "total-timeout",
                    limit_s=_round(last), results=[result])


async def disconnect(target: Target) -> Measured:
    """The client leaves after 3 events; the model is silent 2 s, then goes on. Who notices?"""
    from labs.scenario.runner import wait_idle
    server = target.server
    script = " ".join([DEFAULT_SCRIPT] * 6)
    body = target.body({"script": script, "tokens_per_s": 20.0, "pause_after_tokens": 4,
                        "pause_s": DISCONNECT_PAUSE_S, "heartbeat_s": 0}, max_tokens=60)
    before = server.metrics()
    result = await target.measure(body, disconnect_after_events=3)
    left = time.monotonic()
    release = await asyncio.to_thread(wait_idle, server, 15.0)
    held = release if release is not None else time.monotonic() - left
    after = server.metrics()
    generated = after.get("streamlab_tokens_generated_total", 0) - before.get("streamlab_tokens_generated_total", 0)
    noticed = (after.get("streamlab_tokens_after_disconnect_total", 0)
               - before.get("streamlab_tokens_after_disconnect_total", 0))
    nobody = max(0.0, generated - result.content_events)
    observed = (f"client left after {result.content_events} events; the server held the request "
                f"{held:.1f} s more and generated {nobody:.0f} tokens for nobody "
                f"(streamlab_tokens_after_disconnect_total +{noticed:.0f})")
    if result.outcome != "disconnected":
        return Measured("disconnect", False, f"the stream ended before the client left: {_broken(result)}",
                        results=[result])
    # A path that passes the departure on frees the server within a decode step or two; one that
    # does not keeps it busy through the silence (HAProxy) or to the end (nginx ignoring aborts).
    if release is None or held >= RELEASE_LIMIT_S:
        return Measured("disconnect", False, observed, "disconnect-not-propagated", results=[result])
    return Measured("disconnect", True, observed, results=[result])


async def concurrent_streams(target: Target) -> Measured:
    count = target.options.streams
    body = target.body({"script": " ".join(["A token stream should reach the reader one token at a time."] * 2)})
    results = await client.measure_many(target.url + "/v1/chat/completions", [body] * count, count,
                                        deadline_s=90.0, headers=target.headers, accept_encoding=None,
                                        read_timeout_s=30.0, total_timeout_s=60.0)
    outcomes: dict[str, int] = {}
    for r in results:
        key = r.outcome if r.outcome != "http-error" else f"HTTP {r.status}"
        outcomes[key] = outcomes.get(key, 0) + 1
    shown = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
    ttfts = sorted(r.ttft_s for r in results if r.ttft_s is not None)
    # A queued stream starts when one before it ends: its first token is one whole stream late
    # (QUEUED_SHARE: half a stream, midway). The shortest stream is the yardstick (the script's
    # pace, however busy the machine): the longest, stretched by a busy CPU, could hide the wave.
    duration = min((r.e2e_s or 0) - (r.ttft_s or 0) for r in results) if results else 0.0
    spread = (ttfts[-1] - ttfts[0]) if ttfts else 0.0
    observed = (f"{count} streams at once: {shown}; first-token spread {spread:.1f} s "
                f"(shortest stream {duration:.1f} s)")
    name = "concurrent-streams"
    if outcomes.get("complete", 0) < count:
        return Measured(name, False, observed, "connection-limit", results=results)
    if duration and spread >= QUEUED_SHARE * duration:
        return Measured(name, False, observed + " (streams queued behind others)", "connection-limit",
                        results=results)
    return Measured(name, True, observed, results=results)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


RUNNERS: dict[str, Callable[[Target], Awaitable[Measured]]] = {
    "streaming": streaming, "gzip": gzip, "silence-before-first-token": silence_before_first_token,
    "silence-mid-stream": silence_mid_stream, "long-stream": long_stream, "disconnect": disconnect,
    "concurrent-streams": concurrent_streams,
}
# Checks that only need the stream to survive run side by side (their timing is not measured);
# the others run one at a time, so no other stream disturbs their numbers or the server's counters.
CONCURRENT = ("silence-before-first-token", "silence-mid-stream", "long-stream")
