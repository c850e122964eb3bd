"""Which entry of a path still shows an idle timeout: the innermost one that cuts the same
silence at the same limit. A cut the client saw late (a busy machine) is asked once more before
the hop is cleared; a hop that lets the silence pass is cleared at once."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Iterator

import pytest

from labs.probe import silence
from labs.probe.base import Observation
from labs.probe.silence import IdleTimeout, Try

LIMIT_S = 1.0
FIRST = Observation("idle-timeout-after-headers", "idle-timeout", True, "idle limit ~1.00 s",
                    limit_s=LIMIT_S, measurements={"cut_from_s": 1.1})


@pytest.fixture()
def answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Try]]:
    """The tries the path answers, in order; each one asked is removed."""
    queue: list[Try] = []

    async def fake_try(ctx: object, hop: int, position: str, silence_s: float, http2: bool = False) -> Try:
        assert not http2  # no hold in these first observations: the inner entry is asked as before
        assert silence_s == FIRST.measurements["cut_from_s"]
        return queue.pop(0)
    monkeypatch.setattr(silence, "try_silence", fake_try)
    yield queue


def cut(after_s: float) -> Try:
    return Try(1.1, False, "HTTP 200 already sent", after_s)


def shows(queue: list[Try], *tries: Try) -> bool:
    queue.extend(tries)
    ctx = SimpleNamespace(settings=SimpleNamespace(max_silence_s=20.0), notes={})  # what shows() reads
    return asyncio.run(IdleTimeout("after-headers").shows(ctx, 1, FIRST))  # type: ignore[arg-type]


def test_a_cut_at_the_limit_shows_it(answers: list[Try]) -> None:
    assert shows(answers, cut(1.05)) and not answers


def test_a_silence_that_passes_clears_the_hop_at_once(answers: list[Try]) -> None:
    assert not shows(answers, Try(1.1, True, "complete", None), cut(1.0))
    assert len(answers) == 1  # not asked again


def test_a_late_cut_is_asked_again(answers: list[Try]) -> None:
    assert shows(answers, cut(1.6), cut(1.02)) and not answers


def test_two_cuts_far_from_the_limit_are_another_limit(answers: list[Try]) -> None:
    assert not shows(answers, cut(1.6), cut(1.7))
