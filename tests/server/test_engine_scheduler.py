"""The decode loop both engines share, driven through the synthetic engine (no model, fast):
pacing, slots, the bounded queue, cancellation, metrics, and where the loop runs."""
from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Awaitable, TypeVar

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from server import metrics  # noqa: E402
from server.engine import (  # noqa: E402
    EngineConfig,
    EngineStopped,
    GenerationRequest,
    Pacing,
    QueueFull,
    SamplingParams,
    create_engine,
)
from server.engine.scheduler import BATCH_TOLERANCE_S, Scheduler  # noqa: E402

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 20.0) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


def synthetic(tokenizer: Any, **kw: Any) -> Scheduler:
    engine = create_engine(EngineConfig(kind="synthetic", **kw), tokenizer)
    assert isinstance(engine, Scheduler)
    return engine


async def collect(gen: Any) -> list[int]:
    return [event.token_id async for event in gen]


async def wait_for(predicate: Any, timeout: float = 2.0) -> float:
    """Poll (never sleep a guess) until predicate() holds; returns the time it took."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.0005)  # poll interval
    return time.monotonic() - t0


def test_forced_script_is_emitted_exactly(tokenizer: Any) -> None:
    script = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る. Plain text, too! 👋🏽"
    forced = tokenizer.encode(script, add_special_tokens=False)

    async def main() -> tuple[list[int], Any]:
        engine = synthetic(tokenizer)
        await engine.start()
        gen = engine.submit(GenerationRequest([1, 2], max_new_tokens=1000, forced_ids=forced))
        ids = await collect(gen)
        await engine.close()
        return ids, gen

    ids, gen = run(main())
    assert ids == forced and tokenizer.decode(ids) == script
    assert gen.finish_reason == "stop" and gen.completion_tokens == len(forced)
    assert gen.prompt_tokens == 2


def test_unscripted_stream_is_deterministic_and_honours_max_tokens(tokenizer: Any) -> None:
    async def main() -> list[list[int]]:
        engine = synthetic(tokenizer)
        await engine.start()
        seeded = SamplingParams(seed=3)
        outs = await asyncio.gather(*[
            collect(engine.submit(GenerationRequest([1], max_new_tokens=40, sampling=s)))
            for s in (SamplingParams(), SamplingParams(), seeded, seeded)])
        await engine.close()
        return outs

    a, b, c, d = run(main())
    assert a == b and c == d and a != c and len(a) == 40


def test_pacing_first_token_delay_rate_and_pause(tokenizer: Any) -> None:
    rate, delay, pause_after, pause = 100.0, 0.08, 5, 0.1
    n = 12
    period = 1 / rate

    async def main() -> list[float]:
        engine = synthetic(tokenizer)
        await engine.start()
        t0 = time.monotonic()
        gen = engine.submit(GenerationRequest(
            [1], max_new_tokens=n, pacing=Pacing(tokens_per_s=rate, first_token_delay_s=delay,
                                                 pause_after_tokens=pause_after, pause_s=pause)))
        arrivals = [time.monotonic() - t0 async for _ in gen]
        await engine.close()
        return arrivals

    arrivals = run(main())
    assert len(arrivals) == n
    early = BATCH_TOLERANCE_S + 0.001
    for i, t in enumerate(arrivals):
        # Never ahead of schedule: token i is due at delay + i/rate (+ pause after pause_after).
        due = delay + i * period + (pause if i >= pause_after else 0.0)
        assert t >= due - early, (i, t, due)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert gaps[pause_after - 1] >= pause - early  # the one silence
    steady = sorted(g for i, g in enumerate(gaps) if i != pause_after - 1)
    median = steady[len(steady) // 2]
    assert period * 0.5 <= median <= period * 2.0, gaps
    # The whole stream is not late by much either (generous: 2 shared cores).
    total = delay + pause + (n - 1) * period
    assert arrivals[-1] <= total + 0.25


def test_queue_full_is_raised_at_once_and_counts(tokenizer: Any) -> None:
    slow = Pacing(tokens_per_s=5.0)

    async def main() -> None:
        engine = synthetic(tokenizer, slots=2, max_queue=1)
        await engine.start()
        gens = [engine.submit(GenerationRequest([1], 100, pacing=slow)) for _ in range(3)]
        await wait_for(lambda: engine.slots_in_use == 2 and engine.queued == 1)
        assert metrics.SLOTS_IN_USE._value.get() == 2
        assert metrics.QUEUED_REQUESTS._value.get() == 1
        assert metrics.SLOTS_TOTAL._value.get() == 2
        t0 = time.monotonic()
        with pytest.raises(QueueFull) as info:
            engine.submit(GenerationRequest([1], 100, pacing=slow))
        assert time.monotonic() - t0 < 0.05 and info.value.retry_after_s >= 1
        gens[2].cancel()  # a queued request leaves the queue at once
        assert engine.queued == 0 and gens[2].finish_reason == "cancelled"
        assert metrics.QUEUED_REQUESTS._value.get() == 0
        engine.submit(GenerationRequest([1], 100, pacing=slow))  # room again
        await engine.close()

    run(main())


def test_cancel_frees_the_slot_at_once_while_waiting_for_a_due_token(tokenizer: Any) -> None:
    async def main() -> tuple[float, Any]:
        engine = synthetic(tokenizer, slots=1, max_queue=0)
        await engine.start()
        gen = engine.submit(GenerationRequest([1], 100, pacing=Pacing(tokens_per_s=2.0)))
        it = gen.__aiter__()
        await it.__anext__()  # one token, then the loop waits 0.5 s for the next one
        gen.cancel()
        took = await wait_for(lambda: engine.slots_in_use == 0)
        rest = [e async for e in it]
        await engine.close()
        return took, (gen, rest)

    took, (gen, rest) = run(main())
    assert took < 0.05  # no waiting for the next due time
    assert gen.finish_reason == "cancelled" and rest == []


def test_batching_shares_steps_and_never_exceeds_slots(tokenizer: Any) -> None:
    async def main() -> tuple[int, list[Any], list[int]]:
        engine = synthetic(tokenizer, slots=4, max_queue=8)
        await engine.start()
        seen: list[int] = []
        gens = [engine.submit(GenerationRequest([1], 30, pacing=Pacing(tokens_per_s=500)))
                for _ in range(8)]

        async def watch() -> None:
            while not all(g.finish_reason for g in gens):
                seen.append(engine.slots_in_use)
                assert metrics.SLOTS_IN_USE._value.get() <= 4
                await asyncio.sleep(0.0005)  # sampling interval of the watcher

        outs = await asyncio.gather(*[collect(g) for g in gens], watch())
        await engine.close()
        return max(seen), gens, [len(o) for o in outs[:8]]

    peak, gens, lengths = run(main())
    assert peak == 4 and lengths == [30] * 8
    assert all(g.finish_reason == "length" for g in gens)


def test_tokens_generated_counter_moves(tokenizer: Any) -> None:
    def value() -> float:
        return metrics.REGISTRY.get_sample_value("streamlab_tokens_generated_total") or 0.0

    async def main() -> None:
        engine = synthetic(tokenizer)
        await engine.start()
        await collect(engine.submit(GenerationRequest([1], 25)))
        await engine.close()

    before = value()
    run(main())
    assert value() - before == 25


def test_tokens_after_disconnect_are_counted_when_nobody_cancels(tokenizer: Any) -> None:
    def after() -> float:
        return metrics.REGISTRY.get_sample_value("streamlab_tokens_after_disconnect_total") or 0.0

    async def main() -> None:
        engine = synthetic(tokenizer)
        await engine.start()
        gen = engine.submit(GenerationRequest([1], 10, pacing=Pacing(tokens_per_s=1000)))
        gen.mark_client_gone()
        await collect(gen)
        await engine.close()

    before = after()
    run(main())
    assert after() - before == 10


def test_close_ends_in_flight_generations_with_engine_stopped(tokenizer: Any) -> None:
    async def main() -> Any:
        engine = synthetic(tokenizer)
        await engine.start()
        assert engine.healthy
        gen = engine.submit(GenerationRequest([1], 100, pacing=Pacing(tokens_per_s=1.0)))
        await wait_for(lambda: engine.slots_in_use == 1)
        await engine.close()
        assert not engine.healthy
        with pytest.raises(EngineStopped):
            await collect(gen)
        with pytest.raises(EngineStopped):
            engine.submit(GenerationRequest([1], 1))
        return gen

    assert run(main()).finish_reason == "error"


@pytest.mark.parametrize("blocking", [False, True])
def test_where_the_decode_loop_runs(tokenizer: Any, blocking: bool) -> None:
    """Off the event loop by default; on it in the `server-blocking-loop` failure mode, where a
    paced stream freezes the event loop between tokens."""
    step_threads: set[int] = set()

    async def main() -> tuple[int, float]:
        engine = synthetic(tokenizer, blocking_loop=blocking)
        original = engine.backend.step

        def step(seqs: Any) -> list[int]:
            step_threads.add(threading.get_ident())
            return original(seqs)

        engine.backend.step = step  # type: ignore[method-assign]
        await engine.start()
        gen = engine.submit(GenerationRequest([1], 4, pacing=Pacing(tokens_per_s=20)))
        # How late does a 1 ms timer fire while the stream runs?
        worst = 0.0
        while not gen.finish_reason:
            t0 = time.monotonic()
            await asyncio.sleep(0.001)  # ok: the 1 ms timer whose lateness is measured, not a wait
            worst = max(worst, time.monotonic() - t0)
        await collect(gen)
        await engine.close()
        return threading.get_ident(), worst

    loop_thread, worst = run(main())
    assert step_threads
    if blocking:
        assert step_threads == {loop_thread}
        assert worst > 0.03  # the loop was frozen for most of a 50 ms token gap
    else:
        assert loop_thread not in step_threads
        assert worst < 0.03


def test_a_burst_of_submits_wakes_the_decode_loop_once_per_event_loop_iteration(tokenizer: Any) -> None:
    """1,000 arrivals used to wake the decode thread 1,000 times (a GIL hand-off, an admission
    and a one-sequence step each); the submits of one event-loop iteration now wake it once,
    and every one of them is still served."""
    async def main() -> tuple[list[int], list[list[int]]]:
        engine = synthetic(tokenizer, slots=100, max_queue=0)
        await engine.start()
        cond = engine.admission.cond
        wakes: list[int] = []
        notify_all = cond.notify_all

        def counted() -> None:
            wakes.append(1)
            notify_all()

        cond.notify_all = counted  # type: ignore[method-assign]
        first = [engine.submit(GenerationRequest([1], 3)) for _ in range(50)]
        assert wakes == []  # none yet: the wake is due at the end of this iteration
        await asyncio.sleep(0)  # one event-loop iteration: the scheduled wake runs
        after_first = len(wakes)
        second = [engine.submit(GenerationRequest([1], 3)) for _ in range(50)]
        outs = await asyncio.gather(*(collect(g) for g in first + second))
        counts = [after_first, len(wakes)]
        await engine.close()  # (close wakes it too)
        return counts, outs

    counts, outs = run(main())
    assert counts == [1, 2]
    assert len(outs) == 100 and all(len(tokens) == 3 for tokens in outs)
