"""The Responses store (server/apis/response_store.py): a window in time, and bounds in count and
bytes, the oldest dropped first."""
from __future__ import annotations

import time

from server.apis.response_store import ResponseStore
from server.apis.responses import ResponsesRequest

REQUEST = ResponsesRequest.model_validate({"model": "tiny", "input": "hi"})


def test_bounded_by_count_and_bytes_oldest_first() -> None:
    by_count = ResponseStore(limit=2)
    for n in range(3):
        by_count.add(f"r{n}", REQUEST, 0, size=10)
    assert [by_count.get(f"r{n}") is not None for n in range(3)] == [False, True, True]
    by_bytes = ResponseStore(limit_bytes=25)
    for n in range(3):
        by_bytes.add(f"r{n}", REQUEST, 0, size=10)
    assert [by_bytes.get(f"r{n}") is not None for n in range(3)] == [False, True, True]
    # One entry larger than the whole bound is still kept (until the next one).
    alone = ResponseStore(limit_bytes=5)
    alone.add("big", REQUEST, 0, size=50)
    assert alone.get("big") is not None


def test_window_and_the_final_object() -> None:
    store = ResponseStore(window_s=0.05)
    entry = store.add("r", REQUEST, 7, size=1)
    assert store.get("r").current("r")["status"] == "in_progress"
    entry.keep({"id": "r", "status": "completed"})
    assert store.get("r").current("r")["status"] == "completed"
    deadline = time.monotonic() + 5
    while store.get("r") is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # poll interval: the window is 0.05 s
    assert store.get("r") is None
