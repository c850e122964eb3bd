"""The lab's server in this test's own event loop, with a completion lane of the test's choosing
(what `python -m server` runs, minus the process: the test can look inside it)."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable

import uvicorn

from server.app import create_app, wrap_middleware
from server.config import ServerConfig
from server.connections import HttpLimits, protocol_class
from server.engine import EngineConfig, create_engine, load_tokenizer
from server.fast_lane import CompletionLane


@contextlib.asynccontextmanager
async def serving(config: ServerConfig, lane_class: Callable[..., CompletionLane] = CompletionLane,
                  slots: int = 4) -> AsyncIterator[tuple[uvicorn.Server, CompletionLane]]:
    """Started (readiness polled) and stopped around the block; yields the server and its lane."""
    tokenizer = load_tokenizer(config.model, config.engine)
    engine = create_engine(EngineConfig(kind="synthetic", model=config.model, slots=slots,
                                        max_queue=slots), tokenizer)
    app = create_app(config, engine, tokenizer)
    lane = lane_class(app.state.service, config)
    server = uvicorn.Server(uvicorn.Config(
        wrap_middleware(app, config), host=config.host, port=config.port, loop="asyncio",
        http=protocol_class("httptools", HttpLimits(), lane), log_level="warning"))
    task: asyncio.Future[Any] = asyncio.ensure_future(server.serve())
    try:
        for _ in range(500):  # readiness, polled
            if server.started or task.done():
                break
            await asyncio.sleep(0.02)  # poll interval
        assert server.started, "the in-process server did not start"
        yield server, lane
    finally:
        server.should_exit = True
        await task
