"""The official `anthropic` SDK consumes `POST /v1/messages`: every event parsed by the SDK's own
types (streams, the `messages.stream()` helper, replies, pings, the mid-stream error, HTTP errors).

The synthetic engine serves them (tests/server/conftest.py's session server); `lab.script` makes
the answer known. Pings are not events the SDK yields (it skips them), so they are read raw.
"""
from __future__ import annotations

import json
import uuid

import anthropic
import httpx
import pytest
from anthropic.types import (
    Message,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    TextDelta,
)

from server.launcher import running_server

JAPANESE = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る"
MESSAGES = [{"role": "user", "content": "Say something."}]
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused",
           "content-type": "application/json"}


@pytest.fixture()
def client(server):
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0,
                             timeout=20) as sdk:
        yield sdk


def lab(**knobs):
    return {"lab": {"script": JAPANESE, **knobs}}


def test_stream_event_by_event(client):
    events = list(client.messages.create(model="tiny", max_tokens=200, messages=MESSAGES,
                                         stream=True, extra_body=lab()))
    kinds = [type(event) for event in events]
    assert kinds[:2] == [RawMessageStartEvent, RawContentBlockStartEvent]
    assert kinds[-3:] == [RawContentBlockStopEvent, RawMessageDeltaEvent, RawMessageStopEvent]
    assert set(kinds[2:-3]) == {RawContentBlockDeltaEvent}
    assert all(isinstance(event.delta, TextDelta) for event in events[2:-3])
    assert "".join(event.delta.text for event in events[2:-3]) == JAPANESE
    start, delta = events[0].message, events[-2]
    assert start.id.startswith("msg_") and start.role == "assistant" and start.usage.input_tokens > 0
    assert delta.delta.stop_reason == "end_turn" and delta.usage.output_tokens >= 1


def test_stream_helper_text_and_final_message(client):
    with client.messages.stream(model="tiny", max_tokens=200, messages=MESSAGES,
                                extra_body=lab()) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == JAPANESE == final.content[0].text and final.stop_reason == "end_turn"


def test_non_stream_reply(client):
    reply = client.messages.create(model="tiny", max_tokens=200, messages=MESSAGES,
                                   system="Be brief.", extra_body=lab())
    assert isinstance(reply, Message) and reply.content[0].text == JAPANESE
    assert reply.stop_reason == "end_turn" and reply.usage.output_tokens >= 1


def test_content_blocks_beyond_text_are_accepted(client):
    """Later turns of a coding agent carry tool results, images and cache hints: accepted, and
    only the text blocks make the prompt."""
    reply = client.messages.create(model="tiny", max_tokens=200, extra_body=lab(), messages=[
        {"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]}])
    assert reply.content[0].text == JAPANESE


def test_a_system_message_inside_messages_is_taken_as_claude_code_sends_it(client, server):
    """Claude Code 2.1.332 puts its environment notes in a `{"role": "system"}` message inside
    `messages`; refused, it sent every prompt again without it (two requests for one prompt)."""
    import time
    wanted = "claude-code-system-" + str(time.monotonic_ns())
    reply = client.messages.create(model="tiny", max_tokens=200, extra_body=lab(), messages=[
        {"role": "user", "content": "Hi"}, {"role": "system", "content": "notes"}],
        extra_headers={"X-Request-Id": wanted})
    assert reply.content[0].text == JAPANESE
    seen = httpx.get(f"{server.url}/lab/requests/{wanted}", timeout=10).json()
    assert seen["api"] == "messages" and seen["outcome"] == "complete"


def test_stop_reasons(client):
    stopped = client.messages.create(model="tiny", max_tokens=200, messages=MESSAGES,
                                     stop_sequences=["STOP"],
                                     extra_body={"lab": {"script": "before STOP after"}})
    assert stopped.content[0].text == "before " and stopped.stop_reason == "stop_sequence"
    cut = client.messages.create(model="tiny", max_tokens=3, messages=MESSAGES)
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 3


def raw_events(server, body: dict) -> list[tuple[str, dict]]:
    """The stream's (event, data) pairs as they are on the wire, pings included."""
    with httpx.stream("POST", server.url + "/v1/messages", json=body, headers=HEADERS,
                      timeout=20) as response:
        assert response.status_code == 200
        blocks = response.read().decode().split("\n\n")
    pairs = []
    for block in filter(None, blocks):
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        pairs.append((fields["event"], json.loads(fields["data"])))
    return pairs


def test_pings_after_the_block_start_and_in_silences(server):
    body = {"model": "tiny", "max_tokens": 50, "messages": MESSAGES, "stream": True,
            **lab(first_token_delay_s=0.5, heartbeat_s=0.1)}
    events = raw_events(server, body)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert all(data == {"type": "ping"} for name, data in events if name == "ping")
    first_delta = names.index("content_block_delta")
    # 0.5 s of silence at 0.1 s per ping: several more before the first text (margin: half).
    assert names[3:first_delta].count("ping") >= 2
    # Without the timer, only the one after content_block_start.
    quiet = [name for name, _ in raw_events(server, {**body, **lab(first_token_delay_s=0.5,
                                                                  heartbeat_s=0)})]
    assert quiet.count("ping") == 1


def test_mid_stream_overloaded_error_is_raised_by_the_sdk(client):
    seen = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        for event in client.messages.create(model="tiny", max_tokens=200, messages=MESSAGES,
                                            stream=True, extra_body=lab(error_after_tokens=8)):
            seen.append(event)
    assert caught.value.status_code == 200  # after the 200, in-band
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert any(isinstance(event, RawContentBlockDeltaEvent) for event in seen)
    assert not any(isinstance(event, RawMessageStopEvent) for event in seen)


def test_anthropic_version_is_required(server):
    body = {"model": "tiny", "max_tokens": 5, "messages": MESSAGES}
    refused = httpx.post(server.url + "/v1/messages", json=body, timeout=10,
                         headers={k: v for k, v in HEADERS.items() if k != "anthropic-version"})
    assert refused.status_code == 400
    assert refused.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "anthropic-version: header is required"}}
    assert httpx.post(server.url + "/v1/messages", json=body, headers=HEADERS,
                      timeout=10).status_code == 200


def test_http_errors_map_to_sdk_exceptions(client):
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="nope", max_tokens=5, messages=MESSAGES)
    assert caught.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="tiny", max_tokens=5, messages=MESSAGES,
                               extra_body={"lab": {"bogus": 1}})
    assert caught.value.body["type"] == "error"
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="tiny", max_tokens=0, messages=MESSAGES)


def test_full_queue_is_529_overloaded():
    with running_server(["--engine", "synthetic", "--slots", "1", "--max-queue", "1"]) as handle:
        slow = {"model": "tiny", "max_tokens": 50, "messages": MESSAGES, "stream": True,
                **lab(first_token_delay_s=5)}
        with httpx.Client(base_url=handle.url, headers=HEADERS, timeout=20) as http:
            # One holds the slot, one waits in the queue: the third finds it full.
            with http.stream("POST", "/v1/messages", json=slow) as first, \
                    http.stream("POST", "/v1/messages", json=slow) as second:
                assert first.status_code == second.status_code == 200
                with anthropic.Anthropic(base_url=handle.url, api_key="unused",
                                         max_retries=0) as sdk:
                    with pytest.raises(anthropic.APIStatusError) as caught:
                        sdk.messages.create(model="tiny", max_tokens=5, messages=MESSAGES)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"


def test_records_and_counts_name_the_api(api):
    """A request sent twice, streamed then not (what Claude Code does when a hop drops the
    `event:` lines), shows on the server as one of each on the messages route."""
    def count(stream: str) -> float:
        return api.metric(f'streamlab_api_requests_total{{api="messages",stream="{stream}"}}')

    before = {mode: count(mode) for mode in ("true", "false")}
    ids = []
    for stream in (True, False):
        request_id = f"messages-{uuid.uuid4().hex[:8]}"
        ids.append(request_id)
        reply = api.client.post("/v1/messages", headers={**HEADERS, "x-request-id": request_id},
                                json={"model": "tiny", "max_tokens": 20, "messages": MESSAGES,
                                      "stream": stream})
        assert reply.status_code == 200
    records = [api.client.get(f"/lab/requests/{rid}").json() for rid in ids]
    assert [(r["api"], r["stream"]) for r in records] == [("messages", True), ("messages", False)]
    assert {mode: count(mode) - before[mode] for mode in before} == {"true": 1, "false": 1}
