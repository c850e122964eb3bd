"""The official Node SDKs consume `POST /v1/responses` (npm `openai`) and `POST /v1/messages` (npm
`@anthropic-ai/sdk`): every event parsed by the SDK's own stream helper, in the documented order,
the text it assembles equal to the `lab.script`, a mid-stream failure as the SDK reports it, and
the Messages pings, which cross the wire but are never yielded (labs/client/node_sdks.py runs
proxies/apps/node/*-client.mjs; `make setup` installs their node_modules, as for node-fetch).
"""
from __future__ import annotations

import json

import pytest

from labs.client import node_sdks
from proxies.apps.nodejs import NODE_DIR
from server.apis.table import APIS

SCRIPT = "Streams cross hops: 鬱蒼とした森で🦩が踊る."
BODIES = {
    "responses": {"model": "tiny", "input": "Say something."},
    "messages": {"model": "tiny", "max_tokens": 200,
                 "messages": [{"role": "user", "content": "Say something."}]},
}
# https://platform.openai.com/docs/api-reference/responses-streaming
RESPONSES_OPEN = ["response.created", "response.in_progress", "response.output_item.added",
                  "response.content_part.added"]
RESPONSES_CLOSE = ["response.output_text.done", "response.content_part.done",
                   "response.output_item.done", "response.completed"]
# https://docs.anthropic.com/en/api/messages-streaming
MESSAGES_OPEN = ["message_start", "content_block_start"]
MESSAGES_CLOSE = ["content_block_stop", "message_delta", "message_stop"]
DELTA = {"responses": "response.output_text.delta", "messages": "content_block_delta"}


def stream(server, api: str, **lab: object) -> node_sdks.SdkReply:
    return node_sdks.stream(api, server.url, {**BODIES[api], "lab": {"script": SCRIPT, **lab}})


def test_each_sdk_is_a_protocol_of_the_servers_table_and_a_pinned_package() -> None:
    pinned = json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]
    assert set(node_sdks.SDKS) <= set(APIS)
    assert all(sdk.package in pinned and (NODE_DIR / sdk.script).is_file() for sdk in node_sdks.SDKS.values())


def test_responses_event_by_event(server) -> None:
    reply = stream(server, "responses")
    assert reply.status == 200 and reply.error is None and reply.ended, reply.error
    types = reply.types
    assert types[:4] == RESPONSES_OPEN and types[-4:] == RESPONSES_CLOSE
    assert set(types[4:-4]) == {DELTA["responses"]} and len(types) > 8
    assert [event["sequence_number"] for event in reply.events] == list(range(len(types)))
    assert reply.text == SCRIPT == reply.final and reply.final_status == "completed"
    assert reply.wire == types  # no [DONE], no event the SDK left out


def test_messages_event_by_event(server) -> None:
    reply = stream(server, "messages", heartbeat_s=0)
    assert reply.status == 200 and reply.error is None and reply.ended, reply.error
    types = reply.types
    assert types[:2] == MESSAGES_OPEN and types[-3:] == MESSAGES_CLOSE
    assert set(types[2:-3]) == {DELTA["messages"]} and len(types) > 5
    assert reply.text == SCRIPT == reply.final and reply.final_status == "end_turn"
    # The one ping after content_block_start crossed the wire; the SDK yields all else, in order.
    assert reply.wire.count("ping") == 1 and [name for name in reply.wire if name != "ping"] == types


def test_messages_pings_reach_the_sdk_which_never_yields_them(server) -> None:
    # 0.5 s before the first token at a ping per 0.1 s: at least 2 more (margin: half of 4-5).
    pinged = stream(server, "messages", first_token_delay_s=0.5, heartbeat_s=0.1)
    quiet = stream(server, "messages", first_token_delay_s=0.5, heartbeat_s=0)
    assert pinged.wire.count("ping") >= 3 and quiet.wire.count("ping") == 1
    assert "ping" not in pinged.types and pinged.text == quiet.text == SCRIPT


@pytest.mark.parametrize("api", sorted(node_sdks.SDKS))
def test_ttft_is_the_first_text_delta_not_a_lifecycle_event(server, api: str) -> None:
    reply = stream(server, api, first_token_delay_s=1.0)
    first_event = reply.events[0]["t"]
    # The lifecycle events leave with the headers; the first text waits out the 1 s delay
    # (margin: half of it for the events before, a tenth for the clocks).
    assert reply.types[0] != DELTA[api] and first_event < 0.5
    assert reply.ttft_s is not None and reply.ttft_s >= 0.9, reply.events[:6]


def test_responses_mid_stream_failure_is_an_event_the_sdk_yields(server) -> None:
    reply = stream(server, "responses", error_after_tokens=3)
    # The Node SDK throws nothing: the failure is the last event, and its helper's response failed.
    assert reply.error is None and reply.types[-1] == "response.failed"
    assert "response.completed" not in reply.types and reply.types.count(DELTA["responses"]) == 3
    assert "injected error" in reply.events[-1]["failure"]["message"]
    assert reply.final_status == "failed" and SCRIPT.startswith(reply.text) and reply.text != SCRIPT


def test_messages_mid_stream_error_is_thrown_as_the_sdks_api_error(server) -> None:
    reply = stream(server, "messages", error_after_tokens=3)
    # `event: error` after the 200: the Node SDK throws its APIError, with no HTTP status.
    assert reply.status == 200 and not reply.ended and reply.final is None
    assert reply.error is not None and reply.error["error"] == "APIError", reply.error
    assert reply.error["type"] == "overloaded_error" and reply.error["status"] is None
    assert reply.types.count(DELTA["messages"]) == 3 and "message_stop" not in reply.types
    assert reply.wire[-1] == "error"
