"""The official SDKs, event by event, through every fixed config (proxies/fixed/) on the release
the lab runs by default, and Caddyfile-2.6 on Caddy 2.6: `openai` on `POST /v1/responses` and its resume
`GET /v1/responses/{id}?stream=true&starting_after=N`, `anthropic` on `POST /v1/messages`.

What a hop can break here and the chat route does not show: a route it does not proxy, a GET it
answers from its cache (a stale `in_progress`, a replayed tail), `event:` lines or `event: ping`
it drops, a header it strips (`anthropic-version`: the server's 400 shows it), a stream it holds.
One proxy per config for the module, in front of the session's synthetic server; every answer
is a `lab.script` paced by `tokens_per_s`, so the text is known and a held stream shows.
"""
from __future__ import annotations

import time
from typing import Any, Iterator

import anthropic
import httpx
import openai
import pytest
from anthropic.types import (RawContentBlockDeltaEvent, RawContentBlockStartEvent, RawContentBlockStopEvent,
                             RawMessageDeltaEvent, RawMessageStartEvent, RawMessageStopEvent, TextDelta)
from openai.types.responses import (ResponseCompletedEvent, ResponseCreatedEvent, ResponseInProgressEvent,
                                    ResponseTextDeltaEvent)

from proxies.base import ProxyName
from proxies.runtime.local import LocalProxy
from tests.reliability.proxy_faults import fixed_proxy, on_releases
from tests.runtimes import PROXIES
from tests.server.test_messages_sdk import HEADERS, raw_events

pytestmark = pytest.mark.slow
SCRIPT = "Streams through every proxy arrive whole, in order, and on time."
TOKENS_PER_S = 50.0  # a few hundred ms per answer: the first text delta leads the last by that much
# Headers 50 ms in, as a model's: clear of Traefik's early cut of POST streams answered at once
# (about 1 in 200, Go's proxy; docs/field-notes.md#traefiks-early-cut), which this module met
# once in five runs before.
HEADERS_DELAY_S = 0.05
MESSAGES = [{"role": "user", "content": "Say something."}]


def lab(**knobs: Any) -> dict[str, Any]:
    return {"lab": {"script": SCRIPT, "tokens_per_s": TOKENS_PER_S, "headers_delay_s": HEADERS_DELAY_S,
                    **knobs}}


# Each proxy on the run's release, and Caddy 2.6 too: its file differs (Caddyfile-2.6), and its
# encoder is the one that held streams whole (docs/proxies.md).
@pytest.fixture(scope="module", params=on_releases(PROXIES))
def proxy(request: pytest.FixtureRequest, proxy_upstream: Any) -> Iterator[LocalProxy]:
    name: ProxyName = request.param
    with fixed_proxy(name, proxy_upstream.port) as running:
        warm_up(running)
        yield running


def warm_up(proxy: LocalProxy) -> None:
    """One unpaced stream per SDK first: each builds its event types' validators on first use,
    and a client busy with that reads the paced deltas late and at once (measured: the first
    stream of a worker had its 24 deltas read within 90 ms of each other, sent over 460 ms)."""
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=20) as sdk:
        list(sdk.responses.create(model="tiny", input="Hi", stream=True, extra_body=lab(tokens_per_s=None)))
    with anthropic.Anthropic(base_url=proxy.url, api_key="unused", max_retries=0, timeout=20) as sdk:
        list(sdk.messages.create(model="tiny", max_tokens=200, messages=MESSAGES, stream=True,
                                 extra_body=lab(tokens_per_s=None)))


@pytest.fixture()
def openai_client(proxy: LocalProxy) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=20) as sdk:
        yield sdk


@pytest.fixture()
def anthropic_client(proxy: LocalProxy) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=proxy.url, api_key="unused", max_retries=0, timeout=20) as sdk:
        yield sdk


def timed(events: Iterator[Any]) -> list[tuple[float, Any]]:
    return [(time.monotonic(), event) for event in events]


def deltas(events: list[Any]) -> str:
    return "".join(event.delta for event in events if isinstance(event, ResponseTextDeltaEvent))


def assert_not_held(arrivals: list[float]) -> None:
    """The first text delta reached the client before the last one by most of the script's
    pacing (half of (n-1)/tokens_per_s as margin): the hop streamed, it did not collect."""
    paced_s = (len(arrivals) - 1) / TOKENS_PER_S
    assert len(arrivals) >= 5 and arrivals[-1] - arrivals[0] >= paced_s / 2, (len(arrivals), paced_s)


def test_responses_stream_event_by_event(openai_client: openai.OpenAI) -> None:
    arrived = timed(openai_client.responses.create(model="tiny", input="Say something.", stream=True,
                                                   extra_body=lab()))
    events = [event for _, event in arrived]
    assert isinstance(events[0], ResponseCreatedEvent) and isinstance(events[1], ResponseInProgressEvent)
    assert isinstance(events[-1], ResponseCompletedEvent)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert deltas(events) == SCRIPT == events[-1].response.output_text
    assert_not_held([at for at, event in arrived if isinstance(event, ResponseTextDeltaEvent)])


def test_responses_resume_gives_the_tail_after_n_each_time(openai_client: openai.OpenAI) -> None:
    """Two resumes after different sequence numbers give two different tails, each starting
    right after its N, and each paced again: a hop that cached the GET would replay one tail,
    or send it at once."""
    whole = list(openai_client.responses.create(model="tiny", input="Say something.", stream=True,
                                                extra_body=lab()))
    response_id = whole[0].response.id
    tails = {}
    for after in (4, 9):
        arrived = timed(openai_client.responses.retrieve(response_id, stream=True, starting_after=after))
        tail = [event for _, event in arrived]
        assert tail[0].sequence_number == after + 1 and isinstance(tail[-1], ResponseCompletedEvent)
        assert [event.sequence_number for event in tail] == list(range(after + 1, len(whole)))
        assert deltas(whole[:after + 1]) + deltas(tail) == SCRIPT
        assert_not_held([at for at, event in arrived if isinstance(event, ResponseTextDeltaEvent)])
        tails[after] = deltas(tail)
    assert tails[4] != tails[9] and tails[4].endswith(tails[9])


def test_responses_non_stream_reply(openai_client: openai.OpenAI) -> None:
    reply = openai_client.responses.create(model="tiny", input="Hi", extra_body=lab())
    assert reply.status == "completed" and reply.output_text == SCRIPT
    assert openai_client.responses.retrieve(reply.id).output_text == SCRIPT


# A local model server needs no key, and a client configured without one (Codex's custom
# provider without `env_key`) sends no Authorization header; with one, caches pass the request
# (Varnish's built-in VCL: https://varnish-cache.org/docs/7.1/users-guide/vcl-built-in-code.html).
KEYS = [pytest.param({}, id="key"), pytest.param({"Authorization": openai.Omit()}, id="no-key")]


@pytest.mark.parametrize("key", KEYS)
def test_responses_stored_object_is_never_stale(openai_client: openai.OpenAI, key: dict[str, Any]) -> None:
    """The stored object polled while its stream runs, then after: `in_progress`, then
    `completed`. A hop that cached the first GET would answer `in_progress` again."""
    statuses = []
    stream_id = None
    for event in openai_client.responses.create(model="tiny", input="Hi", stream=True, extra_body=lab()):
        if isinstance(event, ResponseCreatedEvent):
            stream_id = event.response.id
        elif isinstance(event, ResponseTextDeltaEvent) and not statuses:
            statuses.append(openai_client.responses.retrieve(stream_id, extra_headers=key).status)
    statuses.append(openai_client.responses.retrieve(stream_id, extra_headers=key).status)
    assert statuses == ["in_progress", "completed"]


def test_messages_stream_event_by_event(anthropic_client: anthropic.Anthropic) -> None:
    arrived = timed(anthropic_client.messages.create(model="tiny", max_tokens=200, messages=MESSAGES,
                                                     stream=True, extra_body=lab()))
    events = [event for _, event in arrived]
    texts = len(events) - 5  # all but the two opening and three closing events
    assert [type(event) for event in events] == [
        RawMessageStartEvent, RawContentBlockStartEvent, *[RawContentBlockDeltaEvent] * texts,
        RawContentBlockStopEvent, RawMessageDeltaEvent, RawMessageStopEvent]
    assert all(isinstance(event.delta, TextDelta) for event in events[2:-3])
    assert "".join(event.delta.text for event in events[2:-3]) == SCRIPT
    assert events[-2].delta.stop_reason == "end_turn"
    assert_not_held([at for at, event in arrived if isinstance(event, RawContentBlockDeltaEvent)])


def test_messages_event_lines_and_pings_pass(proxy: LocalProxy) -> None:
    """Every `data:` arrives with its `event:` line (KeyError otherwise), and the pings sent
    in a 0.5 s silence at 0.1 s each arrive too (margin: at least 2 of them)."""
    body = {"model": "tiny", "max_tokens": 200, "messages": MESSAGES, "stream": True,
            **lab(first_token_delay_s=0.5, heartbeat_s=0.1)}
    events = raw_events(proxy, body)  # the SDK skips pings: read raw, as the wire has them
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"] and names[-1] == "message_stop"
    assert all(data == {"type": "ping"} for name, data in events if name == "ping")
    assert names[3:names.index("content_block_delta")].count("ping") >= 2, names


def test_messages_mid_stream_overloaded_error_is_raised(anthropic_client: anthropic.Anthropic) -> None:
    """`event: error` after the 200 and 4 tokens reaches the SDK, which raises it: the text
    before it is the script's start, and no `message_stop` came (the hop did not end it cleanly)."""
    text, kinds = "", set()
    stream = anthropic_client.messages.create(model="tiny", max_tokens=200, messages=MESSAGES, stream=True,
                                              extra_body=lab(error_after_tokens=4))
    with pytest.raises(anthropic.APIStatusError) as caught:
        for event in stream:
            kinds.add(event.type)
            text += event.delta.text if isinstance(event, RawContentBlockDeltaEvent) else ""
    assert (caught.value.status_code, caught.value.body["error"]["type"]) == (200, "overloaded_error")
    assert text and SCRIPT.startswith(text) and text != SCRIPT
    assert "message_start" in kinds and "message_stop" not in kinds


def test_messages_anthropic_version_reaches_the_server(proxy: LocalProxy) -> None:
    """Without the header the server answers 400; with it 200: the proxy forwards it (a hop
    that stripped it would turn both into the 400)."""
    body = {"model": "tiny", "max_tokens": 5, "messages": MESSAGES, **lab()}
    without = {name: value for name, value in HEADERS.items() if name != "anthropic-version"}
    refused = httpx.post(proxy.url + "/v1/messages", json=body, headers=without, timeout=10)
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"
    assert "anthropic-version" in refused.json()["error"]["message"]
    assert httpx.post(proxy.url + "/v1/messages", json=body, headers=HEADERS,
                      timeout=10).status_code == 200
