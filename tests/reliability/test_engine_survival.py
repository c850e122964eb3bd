"""The engine survives any one request: waits beyond any timer's range, a sequence whose sampling
fails, a top_p float32 rounds to 0; and when the decode loop dies anyway, the server says so,
fails /healthz, and exits non-zero so that a supervisor restarts it."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from server.config import ServerConfig
from server.engine import EngineConfig, GenerationRequest, Pacing, SamplingParams, create_engine
from server.engine.backend import SequenceFailed
from server.http.app import create_app
from server.launcher import REPO_ROOT
from server.processes import ManagedProcess, free_port


def synthetic(tokenizer: Any) -> Any:
    return create_engine(EngineConfig(kind="synthetic", slots=4, max_queue=4), tokenizer)


async def drain(generation: Any) -> list[int]:
    return [event.token_id async for event in generation]


def test_a_wait_beyond_any_timer_neither_kills_the_loop_nor_holds_the_slot(tokenizer) -> None:
    """Below the schema: a due time 10^12 s away (threading's TIMEOUT_MAX is ~10^9) once raised
    OverflowError in the decode thread and killed it for everyone."""
    async def main() -> None:
        engine = synthetic(tokenizer)
        await engine.start()
        try:
            far = engine.submit(GenerationRequest([1, 2], 5, pacing=Pacing(first_token_delay_s=1e12)))
            slow = engine.submit(GenerationRequest([1, 2], 3, pacing=Pacing(tokens_per_s=1e-12)))
            deadline = time.monotonic() + 5
            while engine.slots_in_use < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # poll interval: both admitted, parked in their waits
            assert engine.slots_in_use == 2 and engine.healthy
            tokens = await asyncio.wait_for(drain(engine.submit(GenerationRequest([1], 4))), 5)
            assert len(tokens) == 4
            far.cancel("disconnect")
            slow.cancel("disconnect")
            deadline = time.monotonic() + 5
            while engine.slots_in_use and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # poll interval
            assert engine.slots_in_use == 0 and engine.healthy
        finally:
            await engine.close()
    asyncio.run(main())


def test_one_failing_sequence_ends_alone_and_the_batch_decodes_on(tokenizer) -> None:
    async def main() -> None:
        engine = synthetic(tokenizer)
        backend = engine.backend
        real_step = backend.step

        def step(seqs: list[Any]) -> list[Any]:
            out = real_step(seqs)
            return [SequenceFailed("boom") if s.request.sampling.seed == 13 and s.generated == 2
                    else token for s, token in zip(seqs, out)]
        backend.step = step
        await engine.start()
        try:
            doomed = engine.submit(GenerationRequest([1], 10, sampling=SamplingParams(seed=13)))
            others = [engine.submit(GenerationRequest([1], 10, sampling=SamplingParams(seed=s)))
                      for s in (1, 2, 3)]
            results = await asyncio.wait_for(asyncio.gather(drain(doomed), *map(drain, others)), 5)
            assert len(results[0]) == 2 and doomed.finish_reason == "error"
            assert "boom" in doomed.error
            assert [len(r) for r in results[1:]] == [10, 10, 10]
            assert all(g.finish_reason == "length" for g in others)
            assert engine.healthy
        finally:
            await engine.close()
    asyncio.run(main())


def test_a_top_p_that_rounds_to_zero_keeps_the_most_likely_token() -> None:
    import torch

    from server.engine.transformers_engine import TransformersBackend

    logits = torch.tensor([0.5, 3.0, 1.0, -2.0])
    generator = torch.Generator().manual_seed(0)
    for top_p in (1e-300, 5e-324, 1e-45):
        picks = {TransformersBackend._sample(logits, SamplingParams(temperature=2.0, top_p=top_p),
                                             generator) for _ in range(20)}
        assert picks == {1}, top_p


def test_a_dead_loop_fails_healthz_and_asks_to_stop(tokenizer) -> None:
    class LoopKiller(BaseException):
        """Nothing a backend should raise: stands for a bug that escapes every handler."""

    async def main() -> None:
        engine = synthetic(tokenizer)

        def step(seqs: list[Any]) -> list[int]:
            raise LoopKiller()
        engine.backend.step = step
        app = create_app(ServerConfig(), engine, tokenizer)
        stopped = asyncio.Event()
        app.state.on_engine_death = stopped.set
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                assert (await client.get("/healthz")).status_code == 200
                reply = await client.post("/v1/chat/completions", json={
                    "model": "tiny", "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]})
                assert reply.status_code in (500, 503), reply.text
                await asyncio.wait_for(stopped.wait(), 5)
                assert app.state.engine_died
                health = await client.get("/healthz")
                assert health.status_code == 503
                assert health.json()["error"]["code"] == "engine_unavailable"
    asyncio.run(main())


# The server, with a backend that kills the decode loop on seed 4242: started as `python -m
# server` would be, so that what is tested is main()'s exit status.
DYING_SERVER = """
import sys
from server.engine.synthetic import SyntheticBackend
real_step = SyntheticBackend.step
def step(self, seqs):
    if any(s.request.sampling.seed == 4242 for s in seqs):
        raise SystemExit("a bug that escapes every handler")
    return real_step(self, seqs)
SyntheticBackend.step = step
from server.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_process_exits_non_zero_when_its_engine_dies(tmp_path: Path) -> None:
    port = free_port("127.0.0.1")
    process = ManagedProcess(name="dying-server", argv=[
        sys.executable, "-c", DYING_SERVER, "--engine", "synthetic", "--host", "127.0.0.1",
        "--port", str(port)], log_path=tmp_path / "server.log", cwd=REPO_ROOT)
    url = f"http://127.0.0.1:{port}"
    process.start()
    try:
        process.wait_ready(lambda: _ok(url + "/healthz"), timeout_s=60)
        body = {"model": "tiny", "seed": 4242, "max_tokens": 3, "stream": True,
                "messages": [{"role": "user", "content": "x"}]}
        with httpx.Client(timeout=10) as client:
            reply = client.post(url + "/v1/chat/completions", json=body)
        assert reply.status_code == 200  # the headers left before the loop died...
        assert b'"engine_stopped"' in reply.content  # ...and the stream says what happened
        assert process.process is not None
        code = process.process.wait(timeout=15)
        assert code == 3, process.log_tail()
        assert "the engine stopped running" in process.log_tail()
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the server lives on with a dead engine:\n{process.log_tail()}")
    finally:
        process.stop()


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False

