"""Streams built by hand at 10 tokens a second (a 0.1 s interval, the pace of verify's and probe's
streams), in the shapes the judges tell apart: clean, held to the end, grouped by a hop."""
from __future__ import annotations

from typing import Any

from labs.client.results import Event, StreamResult

DT = 0.1


def stream(times: list[float], reads: list[int] | None = None, hops: list[float] | None = None,
           **fields: Any) -> StreamResult:
    """A complete stream whose content events came at `times`, in socket reads `reads` (one each
    by default), each `hops[i]` seconds after the origin stamped it (unstamped without `hops`)."""
    reads = reads or list(range(1, len(times) + 1))
    stamps: list[float | None] = list(hops) if hops else [None] * len(times)
    events = [Event(t=t, read=r, kind="content", hop_s=h) for t, r, h in zip(times, reads, stamps)]
    end = times[-1] + 0.005 if times else 0.005
    base: dict[str, Any] = dict(outcome="complete", saw_done=True, status=200, ttft_s=times[0] if times else None,
                                e2e_s=end, end_s=end, reads=len(set(reads)))
    return StreamResult(events=events, **{**base, **fields})


def due(n: int = 20, start: float = 0.01) -> list[float]:
    return [start + DT * i for i in range(n)]


def clean(n: int = 20, **fields: Any) -> StreamResult:
    """Every token in a read of its own when it is due, stamped with a small hop delay."""
    return stream(due(n), hops=[0.002] * n, **fields)


def held(n: int = 20, **fields: Any) -> StreamResult:
    """Every event in one read when the last token was made."""
    end = due(n)[-1]
    return stream([end] * n, [1] * n, hops=[end - t for t in due(n)], **fields)


def grouped(n: int = 21, size: int = 3, late_by: float = 0.0, **fields: Any) -> StreamResult:
    """Groups of `size`, each sent when its last token was made (HAProxy without http-no-delay)."""
    made = due(n)
    ends = [made[min(n - 1, (i // size) * size + size - 1)] + late_by for i in range(n)]
    return stream(ends, [1 + i // size for i in range(n)], hops=[e - t for e, t in zip(ends, made)], **fields)
