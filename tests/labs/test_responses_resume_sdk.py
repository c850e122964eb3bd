"""The resume of `responses-resume` as the official `openai` SDK reads it.

A Responses stream cut by the server (`lab.abort_after_tokens`) is resumed with
`client.responses.retrieve(id, stream=True, starting_after=N)`, direct and through the scenario's
fixed Varnish config (event streams passed): every event is parsed by the SDK's own types, the
sequence numbers go on from N + 1 without a gap, the deltas join the cut text into the whole script,
and each resume reached the server (none was a cache's copy).
"""
from __future__ import annotations

import asyncio
import openai
import pytest
from openai.types.responses import ResponseCompletedEvent, ResponseTextDeltaEvent

from labs import catalogue, client
from labs.catalogue.drivers import response_id
from labs.client.apis import client_api
from labs.lab.server import served_model
from labs.scenario.model import Variant
from labs.scenario.runner import Lab
from server.apis.table import RESPONSES
from server.launcher import ServerHandle

SCRIPT = "Every token should reach the reader the moment the model makes it."
CUT_AFTER = 6  # tokens before the server drops the first connection
STREAMED = 'streamlab_api_requests_total{api="responses",stream="true"}'
SCENARIO = catalogue.get("responses-resume")


def _cut_stream(entry: str, model: str) -> client.StreamResult:
    body = client_api(RESPONSES.name).body(model, "Say something.", 256, {
        "script": SCRIPT, "tokens_per_s": 50.0, "abort_after_tokens": CUT_AFTER})
    return asyncio.run(client.measure_stream(entry + RESPONSES.path, body, api=RESPONSES.name,
                                             read_timeout_s=10))


def _sdk_resume(entry: str, rid: str, after: int) -> tuple[list[int], str, list[object]]:
    """(sequence numbers, joined deltas, events) of one resume, read by the SDK."""
    with openai.OpenAI(base_url=entry + "/v1", api_key="unused", max_retries=0, timeout=20) as sdk:
        events = list(sdk.responses.retrieve(rid, stream=True, starting_after=after))
    text = "".join(e.delta for e in events if isinstance(e, ResponseTextDeltaEvent))
    return [e.sequence_number for e in events], text, events


@pytest.mark.parametrize("path", [(), SCENARIO.path], ids=["direct", "varnish-fixed"])
def test_sdk_reads_the_resume_after_n(synthetic_server: ServerHandle, path: tuple[str, ...]) -> None:
    server = synthetic_server
    variant = SCENARIO.variant("fixed") if path else Variant()
    with Lab(engine="synthetic") as lab, lab.path(path, variant, server.port) as hops:
        entry = hops[0].url if hops else server.url
        cut = _cut_stream(entry, served_model(server.url))
        rid = response_id(cut)
        assert cut.outcome == "truncated" and rid, f"{cut.outcome}: {cut.error}"
        assert 0 < len(cut.text) < len(SCRIPT)
        after = sum(1 for event in cut.events if event.kind != "comment") - 1
        before = server.metrics().get(STREAMED, 0.0)
        for _ in range(2):  # the second is what a cache would have answered
            numbers, text, events = _sdk_resume(entry, rid, after)
            assert numbers == list(range(after + 1, after + 1 + len(numbers))), numbers
            assert cut.text + text == SCRIPT
            assert isinstance(events[-1], ResponseCompletedEvent)
        assert server.metrics().get(STREAMED, 0.0) - before == 2, "a resume did not reach the server"
