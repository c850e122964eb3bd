"""The official `openai` SDK consumes the server: streams, replies, lab knobs, errors.

Most tests use the synthetic engine; one module-scoped server runs the real transformers engine.
"""
from __future__ import annotations

import openai
import pytest

from server.launcher import running_server

JAPANESE = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る"
MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture()
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                       timeout=20) as sdk:
        yield sdk


def collect(stream) -> tuple[str, list, str | None, object]:
    text, chunks, finish, usage = "", [], None, None
    for chunk in stream:
        chunks.append(chunk)
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, chunks, finish, usage


def test_non_streaming_reply(client):
    reply = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=5)
    assert reply.object == "chat.completion"
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.content
    assert reply.usage.completion_tokens == 5


def test_stream_with_usage(client):
    stream = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=7,
                                            stream=True, stream_options={"include_usage": True})
    text, chunks, finish, usage = collect(stream)
    assert text and finish == "length"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert usage.completion_tokens == 7 and chunks[-1].choices == []


def test_lab_script_through_extra_body(client):
    stream = client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True,
                                            extra_body={"lab": {"script": JAPANESE,
                                                                "tokens_per_s": 500}})
    text, _, finish, _ = collect(stream)
    assert text == JAPANESE and finish == "stop"


def test_stop_sequence_finish_reason(client):
    reply = client.chat.completions.create(
        model="tiny", messages=MESSAGES, stop=["STOP"],
        extra_body={"lab": {"script": "before STOP after"}})
    assert reply.choices[0].message.content == "before "
    assert reply.choices[0].finish_reason == "stop"


def test_in_band_error_is_raised_by_the_sdk(client):
    stream = client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True,
                                            max_tokens=20, extra_body={"lab": {"error_after_tokens": 2}})
    with pytest.raises(openai.APIError, match="injected error"):
        collect(stream)


def test_http_errors_map_to_sdk_exceptions(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=MESSAGES)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny", messages=MESSAGES,
                                       extra_body={"lab": {"bogus": 1}})
    assert caught.value.body["param"] == "lab.bogus"


def test_models_list(client):
    assert [m.id for m in client.models.list()] == ["tiny"]


@pytest.fixture(scope="module")
def transformers_server(tokenizer):
    with running_server(["--device", "cpu", "--slots", "2"]) as handle:
        yield handle


@pytest.mark.slow
def test_transformers_engine_streams_a_script_exactly_and_random_text_safely(transformers_server):
    with openai.OpenAI(base_url=transformers_server.url + "/v1", api_key="unused", max_retries=0,
                       timeout=60) as sdk:
        scripted = sdk.chat.completions.create(model="tiny", messages=MESSAGES, stream=True,
                                               extra_body={"lab": {"script": JAPANESE}})
        text, _, finish, _ = collect(scripted)
        assert text == JAPANESE and finish == "stop"
        # Random weights: any bytes at all, decoded without a crash, to the token budget or eos.
        sampled = sdk.chat.completions.create(model="tiny", messages=MESSAGES, stream=True,
                                              max_tokens=40, seed=1,
                                              stream_options={"include_usage": True})
        _, _, finish, usage = collect(sampled)
        assert finish in ("stop", "length") and 1 <= usage.completion_tokens <= 40


def test_sdk_ignores_heartbeats_and_reads_stamps(client):
    stream = client.chat.completions.create(
        model="tiny", messages=MESSAGES, stream=True,
        extra_body={"lab": {"script": "after a silence", "first_token_delay_s": 0.3,
                            "heartbeat_s": 0.05, "stamp": True}})
    text, chunks, finish, _ = collect(stream)
    assert text == "after a silence" and finish == "stop"
    assert all(isinstance(chunk.model_extra["sent_at"], float) for chunk in chunks)
