"""The measuring client: one lean asyncio HTTP/1.1 client that numbers every socket read.

    result = await measure_stream(url, body, read_timeout_s=10)     # one stream: a StreamResult
    batch = await run_many(url, bodies, concurrency=100, deadline_s=60)  # many, and their cost

It knows nothing of proxies or of the server's internals: it POSTs a body to an OpenAI-compatible
(or Anthropic Messages) URL and records what arrives. How a connection is read, and what counts as
which outcome, is its protocol (labs/client/protocol.py); how each wire protocol's events read is
labs/client/apis/. `python -m labs.client URL` runs it on its own (labs/client/cli.py).
"""

from __future__ import annotations

import asyncio
import json
import math
import ssl
import time
from dataclasses import dataclass
from functools import cache
from typing import Any, Mapping, Sequence

from labs.client.http2 import H2Exchange, tls_context
from labs.client.protocol import Exchange, Options, Target, request_bytes
from labs.client.results import StreamResult, aggregate

__all__ = ["Batch", "Options", "StreamResult", "measure_many", "measure_stream", "run_many"]


async def _measure(target: Target, url: str, body: bytes, opts: Options, deadline: float,
                   epoch: float | None = None) -> StreamResult:
    result = StreamResult(url=url, mode=opts.mode)
    loop = asyncio.get_running_loop()
    if opts.http2 and not target.tls:
        raise ValueError(f"http2 needs an https URL (HTTP/2 over TLS with ALPN), got {url!r}")
    if opts.proxy is not None and target.tls:
        raise ValueError(f"a forward proxy for an https URL needs a CONNECT tunnel, which this "
                         f"client does not make: {url!r} through {opts.proxy!r}")
    connect_to = Target.parse(opts.proxy) if opts.proxy is not None else target
    exchange = H2Exchange(result, opts, deadline) if opts.http2 else Exchange(result, opts, deadline)
    connect_timeout = min(opts.connect_timeout_s or math.inf, deadline - time.perf_counter())
    started = time.perf_counter()
    context = (tls_context(opts.verify_tls) if opts.http2 else
               (_tls_context() if opts.verify_tls else tls_context(False, http2=False)) if target.tls else None)
    try:
        await asyncio.wait_for(
            loop.create_connection(lambda: exchange, connect_to.host, connect_to.port, ssl=context),
            timeout=None if connect_timeout == math.inf else max(0.0, connect_timeout),
        )
    except (OSError, asyncio.TimeoutError) as exc:
        result.outcome = "connect-error"
        result.error = f"connect: {type(exc).__name__}: {exc}"
        return result
    result.connect_s = time.perf_counter() - started
    try:
        if isinstance(exchange, H2Exchange):
            exchange.send_request(target, body)
        else:
            exchange.send(request_bytes(target, body, opts))
        if epoch is not None:
            result.start_s = exchange.t0 - epoch
        await exchange.done
    finally:  # cancelled from outside: close the socket and keep what was measured
        exchange.expire("cancelled")
    return result


@cache
def _tls_context() -> ssl.SSLContext:
    # one context for every connection: building one costs milliseconds (it loads the CA store)
    return ssl.create_default_context()


def _encode(body: Mapping[str, Any] | bytes) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


async def measure_stream(url: str, body: Mapping[str, Any] | bytes, **options: Any) -> StreamResult:
    """Send one request to `url` (the full URL: /v1/chat/completions, or the path of `api`) and
    measure its stream.

    `options` are the fields of `Options`: mode, read_timeout_s, total_timeout_s,
    connect_timeout_s, headers, accept_encoding, disconnect_after_events, api (chat, responses,
    messages: labs/client/apis).
    """
    opts = Options(**options)
    deadline = time.perf_counter() + (opts.total_timeout_s if opts.total_timeout_s is not None else math.inf)
    return await _measure(Target.parse(url), url, _encode(body), opts, deadline)


@dataclass
class Batch:
    """The results of `run_many`, in the order of the bodies, and what the client cost."""

    results: list[StreamResult]
    concurrency: int
    wall_s: float
    client_cpu_s: float  # this process's CPU (user + system) during the batch

    def aggregate(self) -> dict[str, Any]:
        out = aggregate(self.results, client_cpu_s=self.client_cpu_s, wall_s=self.wall_s)
        out["concurrency"] = self.concurrency
        return out


async def run_many(url: str, bodies: Sequence[Mapping[str, Any] | bytes], concurrency: int,
                   deadline_s: float | None = None, **options: Any) -> Batch:
    """Measure many streams with at most `concurrency` open at once, within `deadline_s`.

    The bound is explicit and is the only one: there is no pool that could quietly queue
    requests and pass its own limit off as the server's. When the deadline passes, open
    streams end as `timeout` and streams not yet started are reported as `timeout` too.
    Note `client_cpu_s` counts the whole process: run the server elsewhere to read it.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    opts = Options(**options)
    target = Target.parse(url)
    payloads = [_encode(b) for b in bodies]
    t_start = time.perf_counter()
    cpu_start = time.process_time()
    deadline = t_start + deadline_s if deadline_s is not None else math.inf
    sem = asyncio.Semaphore(concurrency)

    async def one(payload: bytes) -> StreamResult:
        async with sem:
            now = time.perf_counter()
            if now >= deadline:
                return StreamResult(url=url, mode=opts.mode, outcome="timeout",
                                    error="not started before the batch deadline")
            own = now + opts.total_timeout_s if opts.total_timeout_s is not None else math.inf
            return await _measure(target, url, payload, opts, min(own, deadline), t_start)

    results = await asyncio.gather(*(one(p) for p in payloads))
    return Batch(list(results), concurrency, time.perf_counter() - t_start,
                 time.process_time() - cpu_start)


async def measure_many(url: str, bodies: Sequence[Mapping[str, Any] | bytes], concurrency: int,
                       deadline_s: float | None = None, **options: Any) -> list[StreamResult]:
    """`run_many` without the cost figures: one StreamResult per body, in order."""
    return (await run_many(url, bodies, concurrency, deadline_s, **options)).results
