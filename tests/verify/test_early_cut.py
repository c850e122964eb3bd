"""A stream through the path that ends with a 200 a few ms after it started (Traefik 3.7 does it to
~1% of POST streams, whatever its config) is measured once more; one that ends so every time
stays what was measured, so a config that really cuts streams is never hidden."""
from __future__ import annotations

import asyncio

import pytest

from labs.client.results import Event, StreamResult
from labs.verify import trials
from labs.verify.model import Options


def result(outcome: str = "truncated", events: int = 1, end_s: float = 0.006, status: int = 200) -> StreamResult:
    return StreamResult(status=status, outcome=outcome, headers_s=0.002, end_s=end_s,
                        events=[Event(t=0.003 + i * 0.001, read=i, kind="content") for i in range(events)])


@pytest.mark.parametrize("shape, cut", [
    ({}, True), ({"events": 0}, True), ({"end_s": 1.5}, False), ({"outcome": "complete"}, False),
    ({"events": 5}, False), ({"status": 504, "outcome": "http-error"}, False), ({"end_s": None}, False),
])
def test_what_counts_as_an_early_cut(shape, cut):
    assert trials.early_cut(result(**shape)) is cut


class Server:
    url = "http://127.0.0.1:9"


@pytest.mark.parametrize("first, second, expected, retried", [
    (result(), result("complete", 12, 1.2), "complete", 1),  # cut once: measured again
    (result(), result(), "truncated", 1),  # cut every time: what the path does, kept
    (result("complete", 12, 1.2), None, "complete", 0),
])
def test_the_entry_is_measured_again_once(monkeypatch, first, second, expected, retried):
    answers = iter([first, second])

    async def fake(url, body, **options):
        return next(answers)
    monkeypatch.setattr(trials.client, "measure_stream", fake)
    target = trials.Target("http://127.0.0.1:1", Server(), "tiny", Options())
    got = asyncio.run(target.measure({}))
    assert got.outcome == expected and len(target.retried) == retried


def test_the_baseline_straight_to_the_server_is_not_measured_again(monkeypatch):
    answers = iter([result(), result("complete", 12, 1.2)])

    async def fake(url, body, **options):
        return next(answers)
    monkeypatch.setattr(trials.client, "measure_stream", fake)
    target = trials.Target("http://127.0.0.1:1", Server(), "tiny", Options())
    assert asyncio.run(target.measure({}, url=Server.url)).outcome == "truncated" and not target.retried
