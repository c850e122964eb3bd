"""The official `openai` SDK consumes `POST /v1/responses`: every event parsed by the SDK's own
types (streams, the `responses.stream()` helper, replies, resuming, failures, HTTP errors).

The synthetic engine serves them (tests/server/conftest.py's session server); `lab.script` makes
the answer known, so the text the SDK joins is compared with it exactly.
"""
from __future__ import annotations

import time

import openai
import pytest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

JAPANESE = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る"
OPENING = [ResponseCreatedEvent, ResponseInProgressEvent, ResponseOutputItemAddedEvent,
           ResponseContentPartAddedEvent]
CLOSING = [ResponseTextDoneEvent, ResponseContentPartDoneEvent, ResponseOutputItemDoneEvent,
           ResponseCompletedEvent]


@pytest.fixture()
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                       timeout=20) as sdk:
        yield sdk


def lab(**knobs):
    return {"lab": {"script": JAPANESE, **knobs}}


def deltas(events) -> str:
    return "".join(e.delta for e in events if isinstance(e, ResponseTextDeltaEvent))


def test_stream_event_by_event(client):
    events = list(client.responses.create(model="tiny", input="Say something.", stream=True,
                                          extra_body=lab()))
    kinds = [type(event) for event in events]
    assert kinds[:4] == OPENING and kinds[-4:] == CLOSING
    assert set(kinds[4:-4]) == {ResponseTextDeltaEvent}
    # Counted from 0, one per event, no gap: what `starting_after` refers to.
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert deltas(events) == JAPANESE == events[-4].text
    final = events[-1].response
    assert final.status == "completed" and final.output_text == JAPANESE
    assert final.usage.output_tokens == len(kinds) - 8 or final.usage.output_tokens >= 1
    assert {final.id} == {event.response.id for event in events if hasattr(event, "response")}
    item_ids = {getattr(e, "item_id", None) for e in events} - {None}
    assert item_ids == {events[2].item.id}


def test_stream_helper_final_response(client):
    with client.responses.stream(model="tiny", input="Say something.", extra_body=lab()) as stream:
        text = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == JAPANESE == final.output_text and final.status == "completed"


def test_non_stream_reply_and_retrieve(client):
    reply = client.responses.create(model="tiny", input=[{"role": "user", "content": "Hi"}],
                                    instructions="Be brief.", extra_body=lab())
    assert reply.object == "response" and reply.status == "completed"
    assert reply.output_text == JAPANESE and reply.usage.output_tokens >= 1
    raw = client.responses.with_raw_response.retrieve(reply.id)
    stored = raw.parse()
    assert stored.id == reply.id and stored.output_text == JAPANESE
    # Its status changes while it runs: no cache on the way may keep it.
    assert raw.headers["cache-control"] == "no-store"


def test_items_beyond_messages_are_accepted(client):
    """Codex sends back tool calls and their outputs in later turns: accepted, and only the
    messages' text makes the prompt."""
    reply = client.responses.create(model="tiny", extra_body=lab(), input=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a b"}])
    assert reply.output_text == JAPANESE


def test_max_output_tokens_ends_incomplete(client):
    events = list(client.responses.create(model="tiny", input="Say something.", stream=True,
                                          max_output_tokens=3))
    assert isinstance(events[-1], ResponseIncompleteEvent)
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert events[-1].response.usage.output_tokens == 3


def test_resume_after_a_dropped_stream(client):
    """The first stream is cut after 4 tokens (lab.abort_after_tokens); the GET resumes after the
    last event it got, and the two halves make the whole answer."""
    first: list = []
    with pytest.raises(openai.APIConnectionError):
        for event in client.responses.create(model="tiny", input="Say something.", stream=True,
                                             extra_body=lab(abort_after_tokens=4)):
            first.append(event)
    assert first and not isinstance(first[-1], ResponseCompletedEvent)
    last = first[-1].sequence_number
    rest = list(client.responses.retrieve(first[0].response.id, stream=True, starting_after=last))
    assert rest[0].sequence_number == last + 1
    assert isinstance(rest[-1], ResponseCompletedEvent)
    assert deltas(first) + deltas(rest) == JAPANESE == rest[-1].response.output_text
    # Without a stream, the stored object: completed by the resumed run.
    assert client.responses.retrieve(first[0].response.id).status == "completed"


def test_unknown_id_is_openai_404(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.retrieve("resp_unknown")
    assert caught.value.body["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        list(client.responses.retrieve("resp_unknown", stream=True, starting_after=2))


def test_expired_id_is_404(tmp_path):
    from server.launcher import running_server

    with running_server(["--engine", "synthetic", "--responses-window-s", "0.2"]) as handle:
        with openai.OpenAI(base_url=handle.url + "/v1", api_key="unused", max_retries=0) as sdk:
            reply = sdk.responses.create(model="tiny", input="Hi", extra_body=lab())
            assert sdk.responses.retrieve(reply.id).status == "completed"  # within the window
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # polled: gone once 0.2 s have passed
                try:
                    sdk.responses.retrieve(reply.id)
                except openai.NotFoundError:
                    break
                time.sleep(0.05)  # poll interval
            else:
                pytest.fail("the response outlived its window")


def test_mid_stream_failure_is_response_failed(client):
    events = list(client.responses.create(model="tiny", input="Say something.", stream=True,
                                          extra_body=lab(error_after_tokens=8)))
    assert isinstance(events[-1], ResponseFailedEvent)
    failed = events[-1].response
    assert failed.status == "failed" and "injected error" in failed.error.message
    assert len(deltas(events)) > 0 and deltas(events) != JAPANESE
    assert client.responses.retrieve(failed.id).status == "failed"


@pytest.mark.parametrize("mode", ["inband", "hold-open"])
def test_hold_open_leaves_the_client_waiting(server, mode):
    """`error_mode: hold-open`: response.failed arrives, then the socket stays open and silent
    until the client's own read timeout; `inband` ends the body at once after the same event."""
    read_timeout_s = 1.0
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                       timeout=openai.Timeout(10, read=read_timeout_s)) as sdk:
        events: list = []
        started = time.monotonic()
        failed_at = None
        try:
            for event in sdk.responses.create(model="tiny", input="Hi", stream=True,
                                              extra_body=lab(error_after_tokens=2, error_mode=mode)):
                events.append(event)
                if isinstance(event, ResponseFailedEvent):
                    failed_at = time.monotonic()
            timed_out = False
        except (openai.APITimeoutError, openai.APIConnectionError):
            timed_out = True
        ended = time.monotonic()
    assert failed_at is not None and isinstance(events[-1], ResponseFailedEvent)
    if mode == "hold-open":
        assert timed_out and ended - failed_at >= read_timeout_s * 0.9
    else:
        assert not timed_out and ended - failed_at < read_timeout_s / 2
    assert ended - started < 10


def test_http_errors_map_to_sdk_exceptions(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="Hi")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="tiny", input="Hi", extra_body={"lab": {"bogus": 1}})
    assert caught.value.body["param"] == "lab.bogus"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="tiny", input="Hi", max_output_tokens=0)
    assert caught.value.body["param"] == "max_output_tokens"
