"""Each wire protocol end to end: the measuring client against the lab's real server (its
`/v1/responses` and `/v1/messages` routes beside chat), a scripted answer paced by `lab` knobs."""
from __future__ import annotations

import asyncio

import pytest

from labs.client import measure_stream
from labs.client.apis import API_NAMES, client_api
from labs.lab.server import served_model
from server.launcher import ServerHandle

SCRIPT = "Every token should reach the reader the moment the model makes it."
TOKENS_PER_S = 40.0  # 25 ms a token: the first token is due one interval after the request


@pytest.mark.parametrize("api", API_NAMES)
def test_a_scripted_answer_in_each_protocol(api: str, synthetic_server: ServerHandle) -> None:
    spoken = client_api(api)
    body = spoken.body(served_model(synthetic_server.url), "hi", 256,
                       {"script": SCRIPT, "tokens_per_s": TOKENS_PER_S})
    r = asyncio.run(measure_stream(synthetic_server.url + spoken.path, body, api=api,
                                   read_timeout_s=10.0, total_timeout_s=30.0))
    assert r.status == 200 and r.outcome == "complete" and r.saw_done, (r.error, r.body_snippet)
    assert r.text == SCRIPT and r.content_events > 5
    first = next(e for e in r.events if e.kind == "content")
    assert r.ttft_s == first.t  # the first text delta, whatever came before it
    if api != "chat":  # the lifecycle events (response.created, message_start) came first: not tokens
        assert r.events[0].kind == "other" and r.events.index(first) > 0
    # Paced: the typical gap is the token interval (margins from the pace, on a shared machine).
    interval = 1.0 / TOKENS_PER_S
    assert interval * 0.5 <= r.summary()["gap_p50_s"] <= interval * 4
