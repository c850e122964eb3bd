"""SSE framing: byte-exact frames, stamps sealed at write time, the streaming-headers policy."""
from __future__ import annotations

import json

import pytest

from labs.client.sse import SSEParser
from server.stream import sse

HEAD = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,'
        b'"model":"tiny","system_fingerprint":"fp_x","choices":')


@pytest.fixture()
def framer() -> sse.ChunkFramer:
    return sse.ChunkFramer("chatcmpl-1", 1700000000, "tiny", "fp_x")


def test_role_frame(framer):
    assert framer.role() == HEAD + (b'[{"index":0,"delta":{"role":"assistant","content":""},'
                                    b'"logprobs":null,"finish_reason":null}]}\n\n')


def test_content_frame_escapes_json_and_keeps_unicode(framer):
    frame = framer.content('a "quote"\n\\ 🦩')
    assert frame == HEAD + ('[{"index":0,"delta":{"content":"a \\"quote\\"\\n\\\\ 🦩"},'
                            '"logprobs":null,"finish_reason":null}]}\n\n').encode()
    assert json.loads(frame[len(b"data: "):])["choices"][0]["delta"]["content"] == 'a "quote"\n\\ 🦩'


def test_control_characters_cannot_break_a_frame(framer):
    frame = framer.content("line\n\ndata: [DONE]\n\n\r\x00")
    assert frame.count(b"\n\n") == 1 and frame.endswith(b"\n\n")


def test_finish_frame(framer):
    assert framer.finish("length") == HEAD + (b'[{"index":0,"delta":{},"logprobs":null,'
                                              b'"finish_reason":"length"}]}\n\n')


def test_usage_frame_and_usage_null_on_every_chunk_when_asked():
    framer = sse.ChunkFramer("chatcmpl-1", 1700000000, "tiny", "fp_x", include_usage=True)
    assert framer.content("x").endswith(b'"finish_reason":null}],"usage":null}\n\n')
    assert framer.usage(3, 4) == HEAD + (b'[],"usage":{"prompt_tokens":3,"completion_tokens":4,'
                                         b'"total_tokens":7}}\n\n')


def test_error_frame_is_openai_shaped(framer):
    error = {"message": "boom", "type": "server_error", "param": None, "code": "x"}
    assert framer.error(error) == (b'data: {"error":{"message":"boom","type":"server_error",'
                                   b'"param":null,"code":"x"}}\n\n')


def test_done_and_ping_frames():
    assert sse.DONE == b"data: [DONE]\n\n"
    assert sse.PING == b": ping\n\n"


def test_stamped_frames_are_sealed_with_the_write_time():
    framer = sse.ChunkFramer("chatcmpl-1", 1700000000, "tiny", "fp_x", stamp=True)
    frames = [framer.content("a"), sse.PING, framer.content("b"), sse.DONE]
    assert isinstance(frames[0], sse.OpenFrame) and not frames[0].endswith(b"\n\n")
    body = sse.seal(frames, 1700000001.25)
    events = SSEParser().feed(body)  # the lab's own parser, as a client reads them
    assert [kind for kind, _, _ in events] == ["data", "comment", "data", "data"]
    assert events[1][1] == "ping" and events[3][1] == "[DONE]"
    for _, payload, _ in (events[0], events[2]):
        obj = json.loads(payload)
        assert obj["sent_at"] == 1700000001.25
        assert list(obj)[-1] == "sent_at"


def test_unstamped_seal_is_a_plain_join(framer):
    frames = [framer.content("a"), framer.content("b")]
    assert sse.seal(frames) == frames[0] + frames[1]


def test_streaming_headers_and_omitting_each():
    assert sse.streaming_headers() == [(b"content-type", b"text/event-stream; charset=utf-8"),
                                       (b"cache-control", b"no-cache"),
                                       (b"x-accel-buffering", b"no")]
    names = [n for n, _ in sse.streaming_headers(["X-Accel-Buffering", "cache-control"])]
    assert names == [b"content-type"]
    # no_transform changes Cache-Control only, and an omitted Cache-Control stays omitted.
    assert dict(sse.streaming_headers(no_transform=True))[b"cache-control"] == b"no-cache, no-transform"
    assert b"cache-control" not in dict(sse.streaming_headers(["cache-control"], no_transform=True))


def test_completion_object_shape():
    obj = sse.completion_object("chatcmpl-1", 1, "tiny", "fp_x", "hi", "stop", 3, 1)
    assert obj["object"] == "chat.completion"
    assert obj["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert obj["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}


def test_framing_benchmarks_run_and_templates_beat_json_dumps():
    from server.tools.bench import bench_framing, bench_stream_path

    framing = bench_framing(4000)
    assert framing["template_us_per_frame"] < framing["json_dumps_us_per_frame"]
    path = bench_stream_path(600)
    assert path["stream_path_us_per_token"] > 0 and path["bytes_per_token"] > 100
