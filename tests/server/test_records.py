"""The per-request record (`GET /lab/requests/{id}`): what the origin saw of a request, by its id."""
from __future__ import annotations

import asyncio
import uuid

from labs.client import measure_stream
from server.http.records import RecordStore
from server.processes import wait_until

SCRIPT = "Every token should reach the reader the moment the model makes it. " * 2


def body(**lab) -> dict:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": 200, "lab": {"script": SCRIPT, "tokens_per_s": 40, **lab}}


def finished_record(api, request_id: str) -> dict:
    found: dict = {}

    def finished() -> bool:
        response = api.client.get(f"/lab/requests/{request_id}")
        found.update(response.json() if response.status_code == 200 else {})
        return bool(found.get("finished"))
    wait_until(finished, 10, interval_s=0.05, describe="the request's record to finish")
    return found


def stream(api, request_id: str, **options) -> object:
    return asyncio.run(measure_stream(api.server.url + "/v1/chat/completions", body(**options.pop("lab", {})),
                                      headers={"X-Request-Id": request_id}, **options))


def test_a_complete_stream_is_recorded_with_its_tokens(api):
    rid = f"t-{uuid.uuid4().hex}"
    result = stream(api, rid)
    assert result.outcome == "complete" and result.headers["x-request-id"] == rid
    record = finished_record(api, rid)
    assert record["outcome"] == "complete"
    assert record["tokens_generated"] == result.content_events > 10
    assert record["client_gone_after_s"] is None and record["tokens_after_disconnect"] == 0
    # The first token left after the headers, and the stream ended after both.
    assert 0 <= record["headers_after_s"] <= record["first_token_after_s"] <= record["ended_after_s"]


def test_a_departure_is_recorded_when_the_server_saw_it(api):
    rid = f"t-{uuid.uuid4().hex}"
    result = stream(api, rid, disconnect_after_events=3)
    assert result.outcome == "disconnected"
    record = finished_record(api, rid)
    assert record["outcome"] == "client-gone"
    # The server stopped within a token or two of the departure (40 tokens/s: 25 ms each).
    assert record["tokens_generated"] <= 3 + 2
    assert abs(record["client_gone_after_s"] - result.disconnect_s) < 0.5


def test_a_departure_the_server_ignores_costs_every_remaining_token(api):
    rid = f"t-{uuid.uuid4().hex}"
    result = stream(api, rid, disconnect_after_events=3, lab={"disconnect": "ignore"})
    record = finished_record(api, rid)
    assert record["outcome"] == "client-gone"
    assert record["tokens_after_disconnect"] >= record["tokens_generated"] - result.content_events - 2 > 10


def test_unknown_ids_get_an_openai_style_404_and_bad_ids_are_not_recorded(api):
    missing = api.client.get("/lab/requests/no-such-request")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "record_not_found"
    bad = "x" * 200  # too long to be an id: the request is served, nothing recorded
    assert stream(api, bad).outcome == "complete"
    assert api.client.get(f"/lab/requests/{bad}").status_code == 404


def test_the_store_keeps_only_the_latest_records():
    store = RecordStore(limit=3)
    for i in range(5):
        store.open(f"r{i}", stream=True)
    assert len(store) == 3
    assert store.get("r0") is None and store.get("r1") is None
    assert store.get("r4") is not None
