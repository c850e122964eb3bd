"""Workload drivers the scenarios share: how their streams are sent, one after another, spread
out in time, or as clients that leave and clients that arrive. Each stream is placed on the workload's time line."""
from __future__ import annotations

import asyncio
import copy
import time
from typing import Any, Mapping

from labs import client
from labs.client.results import StreamResult
from labs.scenario.model import Driver, Workload


def _with(body: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The request body with `overrides`: top-level fields replaced, the `lab` object merged."""
    merged = copy.deepcopy(dict(body))
    for key, value in overrides.items():
        merged[key] = {**merged.get(key, {}), **value} if key == "lab" else value
    return merged


async def _timed(epoch: float, url: str, body: Mapping[str, Any] | bytes, **options: Any) -> StreamResult:
    """One measured stream, placed on the workload's time line (`start_s`, for the picture)."""
    started = time.perf_counter()
    result = await client.measure_stream(url, body, **options)
    result.start_s = started - epoch
    return result


def one_after_another(*overrides: Mapping[str, Any]) -> Driver:
    """One stream per entry, in order, each with its own body changes."""
    async def drive(url: str, body: dict[str, Any], workload: Workload,
                    options: Mapping[str, Any]) -> list[StreamResult]:
        epoch = time.perf_counter()
        return [await _timed(epoch, url, _with(body, o), **options) for o in overrides]
    return drive


def leave_then_arrive(leavers: int, leave_after: int, arrivals: int,
                      arrival_lab: Mapping[str, Any]) -> Driver:
    """`leavers` clients close after `leave_after` tokens; then `arrivals` new ones come in.

    The newcomers' TTFT shows the capacity the departed still hold: with few slots and no
    disconnect handling they wait for the abandoned generations to run to their end.
    """
    async def drive(url: str, body: dict[str, Any], workload: Workload,
                    options: Mapping[str, Any]) -> list[StreamResult]:
        stay = {k: v for k, v in options.items() if k != "disconnect_after_events"}
        epoch = time.perf_counter()
        gone = await asyncio.gather(*(
            _timed(epoch, url, body, **{**stay, "disconnect_after_events": leave_after})
            for _ in range(leavers)))
        later = _with(body, {"lab": arrival_lab})
        came = await asyncio.gather(*(_timed(epoch, url, later, **stay) for _ in range(arrivals)))
        return [*gone, *came]
    return drive


def paced_at_the_cut(count: int, cut_s: float, offsets_s: tuple[float, ...]) -> Driver:
    """`count` requests one after another, each sent `cut_s` plus an offset (in turn from
    `offsets_s`) after the previous one ended: an idle connection the proxy pooled is reused
    around the moment the server closes it."""
    async def drive(url: str, body: dict[str, Any], workload: Workload,
                    options: Mapping[str, Any]) -> list[StreamResult]:
        epoch = time.perf_counter()
        results: list[StreamResult] = []
        for i in range(count):
            if results:
                # Timed from the previous response's end, as the server's idle timer is.
                await asyncio.sleep(max(0.0, cut_s + offsets_s[i % len(offsets_s)]))
            results.append(await _timed(epoch, url, body, **options))
        return results
    return drive


def staggered(count: int, apart_s: float) -> Driver:
    """`count` users send the same request, each `apart_s` after the one before: arrivals as
    real users make them, never two in the same millisecond."""
    async def drive(url: str, body: dict[str, Any], workload: Workload,
                    options: Mapping[str, Any]) -> list[StreamResult]:
        epoch = time.perf_counter()

        async def user(index: int) -> StreamResult:
            await asyncio.sleep(index * apart_s)
            return await _timed(epoch, url, body, **options)
        return list(await asyncio.gather(*(user(i) for i in range(count))))
    return drive


def response_id(result: StreamResult) -> str | None:
    """The id a Responses stream announced in its `response.created` event (the client keeps it
    as that event's text), or None when none arrived."""
    for event in result.events:
        kind, _, rid = event.text.partition(" ")
        if event.kind == "other" and kind == "response.created" and rid:
            return rid
    return None


def cut_then_resume(resumes: int) -> Driver:
    """A Responses stream cut mid-way (the body's `lab.abort_after_tokens`), then `resumes`
    times `GET /v1/responses/{id}?stream=true&starting_after=N`, N the sequence number of the
    last event that arrived (events count from 0), as the OpenAI SDK's
    `responses.retrieve(id, stream=True, starting_after=N)` sends it. Without an id (the stream
    never started) there is nothing to resume."""
    async def drive(url: str, body: dict[str, Any], workload: Workload,
                    options: Mapping[str, Any]) -> list[StreamResult]:
        epoch = time.perf_counter()
        cut = await _timed(epoch, url, body, **options)
        rid = response_id(cut)
        if rid is None:
            return [cut]
        last = sum(1 for event in cut.events if event.kind != "comment") - 1
        again = f"{url}/{rid}?stream=true&starting_after={last}"
        return [cut, *[await _timed(epoch, again, b"", **{**options, "method": "GET"})
                       for _ in range(resumes)]]
    return drive
