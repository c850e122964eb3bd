"""The lab's server in this test's own event loop, with a completion lane of the test's choosing
or none (what `python -m server` runs, minus the process: the test can look inside it)."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, AsyncIterator, Callable, Iterator

import uvicorn

from server.config import ServerConfig
from server.engine import EngineConfig, create_engine, load_tokenizer
from server.http.app import create_app, wrap_middleware
from server.http.connections import HttpLimits, protocol_class
from server.http.fast_lane import CompletionLane

STARTUP_S = 10.0  # the synthetic engine and the tokenizer load in well under a second


@contextlib.asynccontextmanager
async def serving(config: ServerConfig,
                  lane_class: Callable[..., CompletionLane] | None = CompletionLane,
                  slots: int = 4, max_queue: int | None = None,
                  ) -> AsyncIterator[tuple[uvicorn.Server, CompletionLane | None]]:
    """Started (readiness polled) and stopped around the block; yields the server and its lane
    (None: every request goes the ASGI way, as when the lane is off)."""
    tokenizer = load_tokenizer(config.model, config.engine)
    engine = create_engine(EngineConfig(kind="synthetic", model=config.model, slots=slots,
                                        max_queue=slots if max_queue is None else max_queue),
                           tokenizer)
    app = create_app(config, engine, tokenizer)
    lane = lane_class(app.state.service, config) if lane_class is not None else None
    limits = HttpLimits(config.max_header_bytes, config.header_timeout_s)
    server = uvicorn.Server(uvicorn.Config(
        wrap_middleware(app, config), host=config.host, port=config.port, loop="asyncio",
        http=protocol_class("httptools", limits, lane), log_level="warning"))
    task: asyncio.Future[Any] = asyncio.ensure_future(server.serve())
    try:
        deadline = asyncio.get_running_loop().time() + STARTUP_S
        while not (server.started or task.done()) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)  # readiness, polled
        assert server.started, "the in-process server did not start"
        yield server, lane
    finally:
        server.should_exit = True
        await task


@contextlib.contextmanager
def serving_in_thread(configs: list[ServerConfig], lane_classes: list[Any],
                      **engine: Any) -> Iterator[list[CompletionLane | None]]:
    """Several in-process servers on one event loop in a thread of their own, for tests that talk
    to them with blocking sockets; all stopped (and the thread joined) when the block ends."""
    started = threading.Event()
    failure: list[BaseException] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    lanes: list[CompletionLane | None] = []

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for config, lane_class in zip(configs, lane_classes):
                _, lane = await stack.enter_async_context(serving(config, lane_class, **engine))
                lanes.append(lane)
            started.set()
            await stop.wait()

    def main() -> None:
        try:
            loop.run_until_complete(run())
        except BaseException as exc:  # reported to the test's thread
            failure.append(exc)
        finally:
            started.set()
            loop.close()

    thread = threading.Thread(target=main, name="in-process servers", daemon=True)
    thread.start()
    try:
        assert started.wait(STARTUP_S * (len(configs) + 1)), "the in-process servers did not start"
        if failure:
            raise failure[0]
        yield lanes
    finally:
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed in between: already stopped
                loop.call_soon_threadsafe(stop.set)
        thread.join(STARTUP_S)
