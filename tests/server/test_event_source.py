"""EventSource's GET form, `id:` fields with resume after Last-Event-ID, and split UTF-8 writes."""
from __future__ import annotations

import json
import urllib.parse

import httpx

from labs.client.sse import SSEParser
from tests.server.conftest import Api, Reply

SCRIPT = "Every token should reach the reader."


def get_stream(api: Api, headers: dict[str, str] | None = None, **fields: object) -> tuple[httpx.Response, Reply]:
    """GET the stream (EventSource's form) and read it whole with the lab's parser, which skips
    `id:` lines as the SSE spec says."""
    body = api.body(stream=True, **fields)
    query = urllib.parse.urlencode({"request": json.dumps(body)})
    response = api.client.get(f"/v1/chat/completions?{query}", headers=headers or {})
    result = Reply(url=str(response.url), status=response.status_code, headers=dict(response.headers))
    if response.status_code == 200:
        result.feed(SSEParser(), response.content, 0.0)
    return response, result.end()


def ids(raw: bytes) -> list[int]:
    return [int(line[4:]) for line in raw.split(b"\n") if line.startswith(b"id: ")]


def test_the_get_form_streams_like_the_post(api: Api) -> None:
    response, result = get_stream(api, lab={"script": SCRIPT})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert result.text == SCRIPT and result.saw_done
    assert ids(response.content) == []  # no ids unless asked: the OpenAI shape is unchanged


def test_event_ids_number_every_data_frame(api: Api) -> None:
    response, result = get_stream(api, lab={"script": SCRIPT, "event_ids": True})
    data_frames = len(result.chunks) + 1  # the chunks and [DONE]
    assert ids(response.content) == list(range(1, data_frames + 1))


def test_last_event_id_resumes_after_that_frame(api: Api) -> None:
    whole, full = get_stream(api, lab={"script": SCRIPT, "event_ids": True})
    resumed, rest = get_stream(api, {"Last-Event-ID": "4"}, lab={"script": SCRIPT, "event_ids": True})
    assert ids(resumed.content)[0] == 5
    assert ids(resumed.content) == ids(whole.content)[4:]
    # Frame 1 is the role chunk, so frames 2-4 carried the first three content deltas.
    first_three = "".join(c["choices"][0]["delta"]["content"] for c in full.content_chunks[:3])
    assert first_three + rest.text == SCRIPT and rest.saw_done


def test_without_event_ids_last_event_id_is_ignored(api: Api) -> None:
    _, result = get_stream(api, {"Last-Event-ID": "4"}, lab={"script": SCRIPT})
    assert result.text == SCRIPT  # the failure mode: a reconnection starts over


def test_a_resumed_stream_is_not_dropped_again(api: Api) -> None:
    lab = {"script": SCRIPT, "event_ids": True, "abort_after_tokens": 3}
    raw, broke = b"", False
    with api.client.stream("POST", "/v1/chat/completions", json=api.body(stream=True, lab=lab)) as response:
        try:
            for data in response.iter_raw():
                raw += data
        except httpx.HTTPError:  # the drop: the chunked body never ends
            broke = True
    assert broke and b"[DONE]" not in raw and ids(raw)[-1] == 4  # the role chunk and 3 tokens
    _, resumed = get_stream(api, {"Last-Event-ID": "4"}, lab=lab)
    assert resumed.saw_done


def test_a_cross_site_get_is_refused(api: Api) -> None:
    before = api.metric("streamlab_tokens_generated_total")
    response, _ = get_stream(api, {"Sec-Fetch-Site": "cross-site", "Origin": "http://example.test"},
                             lab={"script": SCRIPT})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "cross_site_request"
    assert api.metric("streamlab_tokens_generated_total") == before
    same, _ = get_stream(api, {"Sec-Fetch-Site": "same-origin"}, lab={"script": SCRIPT})
    assert same.status_code == 200


def test_a_get_without_the_request_is_a_clear_400(api: Api) -> None:
    response = api.client.get("/v1/chat/completions")
    assert response.status_code == 400
    assert "request" in response.json()["error"]["message"]


def test_split_utf8_cuts_a_character_across_two_writes(api: Api) -> None:
    chunks: list[bytes] = []
    body = api.body(stream=True, lab={"script": "森で🦩", "split_utf8_ms": 30})
    with api.client.stream("POST", "/v1/chat/completions", json=body) as response:
        chunks = list(response.iter_raw())
    cut = [c for c in chunks if c and _ends_mid_character(c)]
    assert len(cut) >= 2  # 森 and 🦩 at least (で may share 森's token)
    text = b"".join(chunks).decode("utf-8")  # whole again once joined
    assert "森" in text and "🦩" in text


def _ends_mid_character(chunk: bytes) -> bool:
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.reason == "unexpected end of data"
    return False
