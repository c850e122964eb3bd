"""A generation's taker (server/engine/generation.py `take_with`): tokens handed over while the
reader waits go to it first; what it declines wakes the reader, what it drops is never read.

The stream's taker (server/stream/streaming.py `_take`) writes those tokens without waking its task:
the 1,000-stream benchmark's per-token cost (docs/performance.md). Here the contract itself.
"""
from __future__ import annotations

import asyncio
from typing import Any

from server.engine.base import GenerationRequest, TokenEvent
from server.engine.generation import End, ScheduledGeneration


class NoScheduler:
    def cancel(self, gen: Any, reason: str) -> None: ...


def _generation() -> ScheduledGeneration:
    return ScheduledGeneration(NoScheduler(), GenerationRequest(prompt_ids=[1, 2], max_new_tokens=8))


def test_taken_tokens_count_declined_ones_wake_the_reader_dropped_ones_vanish() -> None:
    async def main() -> None:
        gen = _generation()
        decisions = iter([True, True, False, None, True])
        taken: list[int] = []

        def taker(token_id: int) -> bool | None:
            decision = next(decisions)
            if decision:
                taken.append(token_id)
            return decision
        gen.take_with(taker)
        read: list[int] = []

        async def reader() -> None:
            async for event in gen:
                read.append(event.token_id)
        task = asyncio.ensure_future(reader())
        gen.deliver(TokenEvent(0, 0))  # the reader has not started waiting: buffered
        await asyncio.sleep(0)  # the reader runs and reads it
        assert read == [0]
        for token in (1, 2, 3, 4, 5):  # the reader waits: each is offered first
            gen.deliver(TokenEvent(token, token))
            await asyncio.sleep(0)
        gen.deliver(End("length"))
        await asyncio.wait_for(task, 1)
        assert taken == [1, 2, 5] and read == [0, 3]  # 4 was dropped
        assert gen.completion_tokens == 5  # 0 and 3 read, 1, 2 and 5 taken
        gen.take_with(None)
    asyncio.run(main())


def test_no_taker_while_tokens_are_buffered_keeps_their_order() -> None:
    async def main() -> None:
        gen = _generation()
        offered: list[int] = []
        gen.take_with(lambda token_id: offered.append(token_id) or True)
        gen.deliver(TokenEvent(7, 0))  # nobody waits yet
        gen.deliver(TokenEvent(8, 1))  # one is buffered: never taken ahead of it
        gen.deliver(End("length"))
        assert [e.token_id async for e in gen] == [7, 8] and offered == []
    asyncio.run(main())
