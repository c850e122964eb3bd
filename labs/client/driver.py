"""The stream driver: N streams at once from one process, through the lab's lean client or httpx's
defaults, on uvloop and without GC pauses. The load lab's steps, the user's-path load and the
benchmarks all measure with it:

    with uvloop_runner() as runner, no_gc_pauses():
        batch = runner.run(streams_at_once(url, body, n=100, deadline_s=30.0))
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from typing import Any, Iterator, Mapping

from labs.client.apis import DEFAULT_API, client_api
from labs.client.http1 import Batch, measure_stream
from labs.client.results import Event, StreamResult
from labs.client.sse import SSEParser


def uvloop_runner() -> asyncio.Runner:
    """uvloop for the client: ~19 us of client CPU per event at 1,000 streams, against ~34 us on
    the default loop (measured by the client's author), so the client stays out of the way."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


async def streams_at_once(url: str, body: Mapping[str, Any], n: int, deadline_s: float,
                          headers: Mapping[str, str] | None = None, ramp_s: float = 0.0,
                          api: str = DEFAULT_API) -> Batch:
    """`run_many` (labs.client.http1) for a load step, except that one stream's exception cannot
    sink the batch: under uvloop, writing the request on a connection the server already closed (a
    server out of fds accepts and drops) raises RuntimeError out of `measure_stream`.
    `ramp_s` spreads the starts evenly over that many seconds (0: all at once); `api` is the wire
    protocol the streams speak (labs/client/apis)."""
    started, cpu0 = time.perf_counter(), time.process_time()
    payload = json.dumps(body).encode()
    extra = dict(headers or {})

    async def one(i: int) -> StreamResult:
        if ramp_s > 0:
            await asyncio.sleep(ramp_s * i / n)
        called = time.perf_counter()
        try:
            r = await measure_stream(url, payload, read_timeout_s=30.0,
                                     total_timeout_s=deadline_s, headers=extra, api=api)
        except (RuntimeError, OSError) as exc:
            r = StreamResult(url=url, outcome="reset", error=f"{type(exc).__name__}: {exc}")
        # t = 0 of a stream is its request write, right after its connect
        r.start_s = called - started + (r.connect_s or 0.0)
        return r

    results = await asyncio.gather(*(one(i) for i in range(n)))
    return Batch(list(results), n, time.perf_counter() - started, time.process_time() - cpu0)


async def httpx_defaults_at_once(url: str, body: Mapping[str, Any], n: int, deadline_s: float,
                                 api: str = DEFAULT_API) -> Batch:
    """What many load scripts do: one `httpx.AsyncClient()` with its defaults, N streams at once.

    httpx's default pool holds 100 connections and waits 5 s (its default timeout) for a free
    one, then raises PoolTimeout: the client's own limit, easy to mistake for the server's.
    Measures only what the lab reports (outcome, TTFT, gaps); reads are not numbered.
    """
    import httpx

    spoken = client_api(api)
    started, cpu0 = time.perf_counter(), time.process_time()

    async def one(http: httpx.AsyncClient) -> StreamResult:
        r = StreamResult(url=url)
        t0 = time.perf_counter()
        r.start_s = t0 - started
        try:
            async with http.stream("POST", url, json=body, headers=spoken.headers()) as response:
                r.status = response.status_code
                r.ttfb_s = time.perf_counter() - t0
                parser = SSEParser()
                async for data in response.aiter_bytes():
                    t = time.perf_counter() - t0
                    for item, payload, name in parser.feed(data):
                        if item != "data":
                            continue
                        kind, text, _, sent_at, _ = spoken.classify(payload, name)
                        r.events.append(Event(t, len(r.events) + 1, kind, text,
                                              None if sent_at is None else time.time() - sent_at))
                        if kind == "content" and r.ttft_s is None:
                            r.ttft_s = t
                        r.saw_done |= kind == "done"
                    r.e2e_s = t
            r.outcome = "complete" if r.saw_done else ("http-error" if (r.status or 0) >= 400 else "truncated")
        except httpx.TimeoutException as exc:
            r.outcome, r.error = "timeout", f"httpx.{type(exc).__name__}"
        except httpx.TransportError as exc:
            r.outcome, r.error = "reset", f"httpx.{type(exc).__name__}: {exc}"
        return r

    async with httpx.AsyncClient() as http:  # the defaults are the point of this row
        results = await asyncio.wait_for(asyncio.gather(*(one(http) for _ in range(n))), deadline_s)
    return Batch(list(results), n, time.perf_counter() - started, time.process_time() - cpu0)


@contextlib.contextmanager
def no_gc_pauses() -> Iterator[None]:
    """No cyclic GC in the client while it measures. This process holds matplotlib, rich,
    pydantic and the proxies' models, and a step adds 100,000s of Event objects: a full
    collection then stops the event loop for tens of ms, and every stream's next read looks
    late (measured: hop delay p99 5.9 ms with GC, 0.5 ms without, 100 streams). A step is
    bounded, and its objects are freed by reference counting; collect once afterwards."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
