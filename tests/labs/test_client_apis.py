"""The measuring client reads each wire protocol (labs/client/apis): canned byte streams, shaped as the
official SDKs define each event (tests/labs/api_streams.py), replayed read by read on a fake clock,
so TTFT and gaps are exact numbers and an event can be split wherever a hop might split it.
"""
from __future__ import annotations

import asyncio
import math

import pytest

from labs.client import protocol
from labs.client.apis import API_NAMES, CLIENT_APIS, client_api
from labs.client.protocol import Exchange, Options, Target, request_bytes
from labs.client.results import StreamResult
from server.apis.table import APIS
from tests.labs import api_streams
from tests.labs.api_streams import CANNED, Canned

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
TEXTS = ["Hel", "lo", " w\u00f6rld"]  # a two-byte character to split in half
STEP = 0.1  # the replay's pacing: one text delta per step


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return 1e9 + self.now


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    abort = close

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


def replay(api: str, reads: list[tuple[float, bytes]], monkeypatch: pytest.MonkeyPatch) -> StreamResult:
    """The stream `reads` (time, bytes) as the client's socket would return them, then the FIN."""
    clock = Clock()
    monkeypatch.setattr(protocol, "time", clock)

    async def run() -> StreamResult:
        result = StreamResult()
        exchange = Exchange(result, Options(api=api, read_timeout_s=None), math.inf)
        exchange.connection_made(Transport())
        exchange.send(b"")
        for at, data in reads:
            clock.now = at
            exchange.data_received(data)
        exchange.eof_received()
        return result

    return asyncio.run(run())


def paced(canned: Canned) -> list[tuple[float, bytes]]:
    """Lifecycle events at once; the first delta split mid-line half a step before it completes
    (so TTFT is the read that completes it, never the read that began it); each later delta a
    step apart, the last split inside its two-byte character; the end a step after."""
    first, *rest = canned.deltas
    reads = [(0.01, HEAD + b"".join(canned.before) + first[:9]), (STEP / 2, first[9:-1]), (STEP, first[-1:])]
    for i, delta in enumerate(rest, start=2):
        if "\u00f6".encode() in delta:
            cut = delta.index("\u00f6".encode()) + 1
            reads += [(i * STEP - 0.01, delta[:cut]), (i * STEP, delta[cut:])]
        else:
            reads.append((i * STEP, delta))
    if canned.after:
        reads.append(((len(canned.deltas) + 1) * STEP, b"".join(canned.after)))
    return reads


def test_the_table_has_the_servers_names_and_paths() -> None:
    assert list(CLIENT_APIS) == list(APIS) == list(API_NAMES)
    assert all(CLIENT_APIS[name].path == api.path for name, api in APIS.items())
    with pytest.raises(ValueError, match="chat, responses, messages"):
        client_api("foo")


@pytest.mark.parametrize("api", API_NAMES)
def test_canned_events_are_the_sdks_shapes(api: str) -> None:
    canned = CANNED[api](TEXTS)
    names = {api_streams.sdk_type(api, payload) for payload, _ in canned.payloads}
    expected = {"chat": {"ChatCompletionChunk"},
                "responses": {"ResponseCreatedEvent", "ResponseTextDeltaEvent", "ResponseCompletedEvent"},
                "messages": {"RawMessageStartEvent", "RawContentBlockDeltaEvent", "RawMessageStopEvent"}}
    assert expected[api] <= names
    if api == "messages":
        assert api_streams.sdk_type(api, api_streams.OVERLOADED) == "ErrorResponse"


@pytest.mark.parametrize("api", API_NAMES)
def test_ttft_is_the_first_text_delta_and_gaps_are_between_tokens(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    canned = CANNED[api](TEXTS)
    assert canned.before, "lifecycle events come before the first delta"  # the precondition
    r = replay(api, paced(canned), monkeypatch)
    assert r.outcome == "complete" and r.saw_done and r.body_complete
    assert r.text == "".join(TEXTS) and r.content_events == len(TEXTS)
    # The lifecycle events arrived in the first read (0.01 s), half the first delta at STEP / 2:
    # TTFT is the read that completed the first delta.
    assert r.ttfb_s == 0.01 and r.events[0].t == 0.01 and r.events[0].kind != "content"
    assert r.ttft_s == STEP
    assert r.gaps == pytest.approx([STEP, STEP])
    # Inter-event gaps also count the lifecycle events: 0 between those that shared a read.
    assert len(r.event_gaps) == len(r.events) - 1 and 0.0 in r.event_gaps
    assert pytest.approx(STEP - 0.01) in r.event_gaps  # the last lifecycle event to the first token
    assert r.summary()["events"] == len(r.events) > len(TEXTS)


@pytest.mark.parametrize("api", API_NAMES)
def test_no_terminal_event_is_truncated(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    canned = CANNED[api](TEXTS, end="none")
    r = replay(api, paced(canned), monkeypatch)
    assert r.body_complete and r.content_events == len(TEXTS)  # the whole body came
    assert r.outcome == "truncated" and not r.saw_done


def test_responses_usage_and_status_come_from_response_completed(monkeypatch: pytest.MonkeyPatch) -> None:
    r = replay("responses", paced(api_streams.responses(TEXTS)), monkeypatch)
    assert r.usage == api_streams.USAGE and r.finish_reason == "completed"


@pytest.mark.parametrize("end", ["response.failed", "error"])
def test_responses_failure_is_an_error_in_band(end: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = replay("responses", paced(api_streams.responses(TEXTS, end=end)), monkeypatch)
    assert r.outcome == "error-in-band" and r.error == "engine failed" and not r.saw_done


def test_responses_done_sentinel_ends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    canned = api_streams.responses(TEXTS, end="none")
    canned.after.append(api_streams.frame("[DONE]"))  # what a relay that thinks in chat adds
    r = replay("responses", paced(canned), monkeypatch)
    assert r.events[-1].text == "[DONE]" and r.outcome == "truncated"


def test_messages_ping_is_a_heartbeat_not_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    canned = api_streams.messages(TEXTS)
    ping = api_streams.frame({"type": "ping"}, "ping")
    # A second ping between two tokens, in a read of its own.
    reads = paced(canned)
    reads.insert(3, (STEP + STEP / 2, ping))
    r = replay("messages", reads, monkeypatch)
    pings = [e for e in r.events if e.text == "ping"]
    assert len(pings) == 2 and {e.kind for e in pings} == {"other"} and r.heartbeats == 2
    assert r.content_events == len(TEXTS) and r.gaps == pytest.approx([STEP, STEP])
    assert STEP / 2 in [pytest.approx(g) for g in r.event_gaps]  # the ping splits an event gap
    assert r.finish_reason == "end_turn" and r.usage == {"output_tokens": len(TEXTS)}


def test_messages_error_event_after_200_is_an_error_in_band(monkeypatch: pytest.MonkeyPatch) -> None:
    r = replay("messages", paced(api_streams.messages(TEXTS, end="error")), monkeypatch)
    assert r.status == 200 and r.content_events == len(TEXTS)
    assert r.outcome == "error-in-band" and r.error == "Overloaded"


def test_messages_without_event_lines_has_no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # A hop that forwards only `data:` lines: the Anthropic SDK drops every unnamed event.
    canned = api_streams.messages(TEXTS, named=False)
    assert b"event:" not in b"".join(canned.before + canned.deltas + canned.after)
    r = replay("messages", paced(canned), monkeypatch)
    assert r.content_events == 0 and r.ttft_s is None and r.outcome == "truncated"
    named = replay("messages", paced(api_streams.messages(TEXTS)), monkeypatch)
    assert named.content_events == len(TEXTS) and named.outcome == "complete"  # the other direction


def test_an_event_split_between_its_event_and_data_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    canned = api_streams.messages(TEXTS)
    first = canned.deltas[0]
    cut = first.index(b"\n") + 1  # right after `event: content_block_delta\n`
    reads = [(0.01, HEAD + b"".join(canned.before) + first[:cut]), (STEP, first[cut:]),
             *((STEP * (i + 2), d) for i, d in enumerate(canned.deltas[1:])), (0.5, b"".join(canned.after))]
    r = replay("messages", reads, monkeypatch)
    assert r.ttft_s == STEP and r.events[3].kind == "content" and r.text == "".join(TEXTS)


@pytest.mark.parametrize("api", API_NAMES)
def test_each_protocols_request(api: str) -> None:
    spoken = client_api(api)
    body = spoken.body("tiny", "hi", 7, lab={"stamp": True}, temperature=0)
    assert body["stream"] is True and body["lab"] == {"stamp": True} and body["temperature"] == 0
    limit = {"chat": "max_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}[api]
    assert body[limit] == 7
    sent = request_bytes(Target.parse(f"http://127.0.0.1:1{spoken.path}"), b"{}",
                         Options(api=api, headers={"X-Request-Id": "r1"})).decode().lower()
    assert f"post {spoken.path} http/1.1" in sent and "x-request-id: r1" in sent
    assert ("anthropic-version: 2023-06-01" in sent and "x-api-key: " in sent) == (api == "messages")


def test_a_resume_is_a_plain_get_and_names_the_created_id() -> None:
    """`GET /v1/responses/{id}?stream=true&starting_after=N` goes as written (an empty body adds no
    EventSource `request=` parameter), and the id it names is the one `response.created` carried."""
    url = "http://127.0.0.1:1/v1/responses/resp_1?stream=true&starting_after=4"
    sent = request_bytes(Target.parse(url), b"", Options(api="responses", method="GET")).decode()
    assert sent.startswith("GET /v1/responses/resp_1?stream=true&starting_after=4 HTTP/1.1\r\n")
    assert "content-length" not in sent.lower()
    created = client_api("responses").classify('{"type": "response.created", "response": {"id": "resp_1"}}')
    assert created[:2] == ("other", "response.created resp_1")


def test_a_callers_key_replaces_the_placeholder() -> None:
    sent = request_bytes(Target.parse("http://127.0.0.1:1/v1/messages"), b"{}",
                         Options(api="messages", headers=client_api("messages").headers("k1")))
    assert sent.lower().count(b"x-api-key") == 1 and b"x-api-key: k1" in sent.lower()
    assert client_api("responses").headers("k1") == {"Authorization": "Bearer k1"}
    assert client_api("chat").headers(None) == {}


def test_messages_body_moves_a_system_prompt_to_its_field() -> None:
    body = client_api("messages").body("tiny", [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "hi"}], 5)
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("api", API_NAMES)
def test_measure_stream_speaks_each_protocol_over_a_socket(api: str) -> None:
    """The canned stream written by a loopback server, a pause before each delta: the request
    carries the protocol's path and headers, and the stream is read as above on a real clock."""
    from labs.client import measure_stream

    canned, pause = CANNED[api](TEXTS), 0.05
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(HEAD + b"".join(canned.before))
        for delta in canned.deltas:
            await asyncio.sleep(pause)
            writer.write(delta)
        writer.write(b"".join(canned.after))
        writer.close()

    async def run() -> StreamResult:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            spoken = client_api(api)
            return await measure_stream(f"http://127.0.0.1:{port}{spoken.path}", spoken.body("tiny", "hi", 5),
                                        api=api, read_timeout_s=5.0, total_timeout_s=10.0)

    r = asyncio.run(run())
    head = seen[0].decode().lower()
    assert head.startswith(f"post {client_api(api).path} ") and ("anthropic-version" in head) == (api == "messages")
    assert r.outcome == "complete" and r.text == "".join(TEXTS)
    # The lifecycle events came at once, the first token a pause later: TTFT is the token's.
    assert r.events[0].kind != "content" and r.ttft_s - r.events[0].t >= pause * 0.8
