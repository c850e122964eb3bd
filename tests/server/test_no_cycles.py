"""A request leaves no reference cycle behind: a completion served by the lane, one served the
ASGI way (with an `X-Request-Id`, which its record layer wraps), and the other routes.

What a request makes (its stream, job, generation, uvicorn's request cycle) must be freed by
reference counting when it ends. Held by a cycle, all of it waited for the cyclic collector's
passes, which cost a burst of 1,000 arrivals 94 us of CPU per request (docs/performance.md;
the server also runs the collector less often, server/__main__.py). The server runs in-process
with the collector keeping everything it finds unreachable (`gc.DEBUG_SAVEALL`); what it finds of
the server's own objects after the requests is a cycle someone made.
"""
from __future__ import annotations

import asyncio
import collections
import gc
from typing import Any

import httpx

from server.config import ServerConfig
from server.processes import free_port
from tests.server.in_process import serving

PATH = "/v1/chat/completions"
BODIES = [
    {"stream": True, "lab": {"script": "one two three"}},
    {"stream": True, "stream_options": {"include_usage": True}, "lab": {"script": "a b"}},
    {"stream": True, "lab": {"script": "a b c d", "error_after_tokens": 2}},
    {"stream": True, "stop": ["two"], "lab": {"script": "one two three"}},
    {"max_tokens": 3, "lab": {"script": "one two three"}},
    {"stream": True, "model": "nope"},
]
ROUNDS = 5
# The ASGI way: (method, path, extra headers); a chat POST with an id goes through the records.
ASGI_REQUESTS = [("POST", PATH, {"X-Request-Id": "cycle-test"}), ("GET", "/healthz", {}),
                 ("GET", "/metrics", {}), ("GET", "/v1/models", {}), ("POST", "/v1/nowhere", {})]
SERVER_MODULES = ("server.", "uvicorn.")


def _servers_garbage() -> collections.Counter[str]:
    found: collections.Counter[str] = collections.Counter()
    for thing in gc.garbage:
        kind = type(thing)
        if kind.__module__.startswith(SERVER_MODULES):
            found[f"{kind.__module__}.{kind.__qualname__}"] += 1
    return found


def test_a_completion_leaves_no_reference_cycle(model_dir: str) -> None:
    config = ServerConfig(model=model_dir, engine="synthetic", port=free_port())

    async def main() -> tuple[list[int], collections.Counter[str], int]:
        statuses: list[int] = []
        async with serving(config, slots=8) as (server, _):
            url = f"http://127.0.0.1:{config.port}{PATH}"
            async with httpx.AsyncClient(timeout=10) as warm:  # imports, caches, first-use state
                await warm.post(url, json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}]})
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                for round_ in range(ROUNDS):
                    for fields in BODIES:
                        # A connection per request: its close ends everything the request made.
                        async with httpx.AsyncClient(timeout=10) as client:
                            reply = await client.post(url, json={
                                "model": "tiny", "messages": [{"role": "user", "content": "hi"}], **fields})
                            statuses.append(reply.status_code)
                    for method, path, headers in ASGI_REQUESTS:
                        async with httpx.AsyncClient(timeout=10) as client:
                            reply = await client.request(
                                method, f"http://127.0.0.1:{config.port}{path}",
                                headers={name: f"{value}-{round_}" for name, value in headers.items()},
                                json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                      "stream": True, "lab": {"script": "a b"}} if method == "POST" else None)
                            statuses.append(reply.status_code)
                            # The id's request went through its record layer.
                            assert "X-Request-Id" not in headers or reply.headers.get("x-request-id")
                for _ in range(500):  # the server's side of each request has ended, polled
                    if not server.server_state.tasks and not server.server_state.connections:
                        break
                    await asyncio.sleep(0.01)  # poll interval
                # A request still running holds its objects (not garbage yet): the check below
                # would pass without having looked at it.
                assert not server.server_state.tasks and not server.server_state.connections
                gc.collect()
                garbage = _servers_garbage()
                unreachable = len(gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
        return statuses, garbage, unreachable

    statuses, garbage, unreachable = asyncio.run(main())
    # The requests really ran: every stream and reply, and the refusal, as many times as sent.
    assert collections.Counter(statuses) == {200: 9 * ROUNDS, 404: 2 * ROUNDS}
    # The collector did run and keep what it found (the client's own cycles, at least)...
    assert unreachable > 0
    # ...and none of it was the server's.
    assert not garbage, f"the server's objects freed only by the cyclic collector: {dict(garbage)}"
