"""The completion lane (server/fast_lane.py) answers exactly as the ASGI route does.

Each request is sent twice to the same server: as it is (the lane serves it) and with an
`X-Request-Id` (the lane hands it to the ASGI app, whose records layer keeps it). The answers must
match: status, the headers a client or proxy reads, and the body (errors as JSON, streams chunk
by chunk with their per-request ids and timestamps left out). A second test runs the server's
protocol in-process with a lane that counts what it serves: the chat POST and nothing else.
"""
from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx
import pytest

from server.config import ServerConfig
from server.fast_lane import CompletionLane
from server.processes import free_port
from tests.server.in_process import serving

PATH = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "hi"}]
COMPARED_HEADERS = ("content-type", "cache-control", "x-accel-buffering", "transfer-encoding",
                    "connection", "retry-after")
_ids = itertools.count()


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": MESSAGES, **fields}


# (name, JSON body or raw bytes, extra headers)
CASES: list[tuple[str, Any, dict[str, str]]] = [
    ("stream", _body(stream=True, lab={"script": "one two three"}), {}),
    ("stream with usage", _body(stream=True, stream_options={"include_usage": True},
                                lab={"script": "a b"}), {}),
    ("stream, in-band error", _body(stream=True, lab={"script": "a b c d", "error_after_tokens": 2}), {}),
    ("stream, event ids resumed", _body(stream=True, lab={"script": "a b c d", "event_ids": True}),
     {"Last-Event-ID": "2"}),
    ("json reply", _body(max_tokens=4, lab={"script": "one two three four"}), {}),
    ("unknown model", {**_body(stream=True), "model": "nope"}, {}),
    ("invalid field", _body(stream=True, temperature="hot"), {}),
    ("unknown lab knob", _body(stream=True, lab={"no_such_knob": 1}), {}),
    ("not JSON", b"{not json", {}),
    ("wrong content type", b"{}", {"Content-Type": "text/plain"}),
    ("body over the limit", _body(stream=True, pad="x" * 70_000), {}),
    ("too many header fields", _body(stream=True), {f"x-extra-{n}": "1" for n in range(120)}),
]


def _send(api_url: str, body: Any, headers: dict[str, str], through_asgi: bool) -> httpx.Response:
    sent = {"Content-Type": "application/json", **headers}
    # A field of the same size either way, so that the header limits' messages agree.
    sent["X-Request-Id" if through_asgi else "X-Request-Ix"] = f"lane-test-{next(_ids):04d}"
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(timeout=10) as client:
        return client.post(api_url + PATH, content=content, headers=sent)


def _normalized(reply: httpx.Response) -> dict[str, Any]:
    headers = {name: reply.headers.get(name) for name in COMPARED_HEADERS}
    kind = reply.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        frames = []
        for line in reply.text.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                for varying in ("id", "created"):
                    chunk.pop(varying, None)
                frames.append(chunk)
            elif line:
                frames.append(line)
        body: Any = frames
    else:
        body = reply.json()
        if isinstance(body, dict):
            for varying in ("id", "created"):
                body.pop(varying, None)
    return {"status": reply.status_code, "headers": headers, "body": body}


@pytest.mark.parametrize("name, body, headers", CASES, ids=[case[0] for case in CASES])
def test_the_lane_answers_as_the_asgi_route(server: Any, name: str, body: Any,
                                            headers: dict[str, str]) -> None:
    lane = _send(server.url, body, headers, through_asgi=False)
    asgi = _send(server.url, body, headers, through_asgi=True)
    assert asgi.headers.get("x-request-id") or asgi.status_code >= 400  # it went the ASGI way
    assert "x-request-id" not in lane.headers
    assert _normalized(lane) == _normalized(asgi)
    assert lane.status_code == (200 if name.startswith(("stream", "json")) else lane.status_code)


class CountingLane(CompletionLane):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.served: list[str] = []

    async def serve(self, cycle: Any, app: Any) -> None:
        self.served.append(f"{cycle.scope['method']} {cycle.scope['path']}")
        await super().serve(cycle, app)


def test_the_lane_takes_the_chat_post_and_nothing_else(model_dir: str) -> None:
    config = ServerConfig(model=model_dir, engine="synthetic", port=free_port())

    async def main() -> list[str]:
        async with serving(config, CountingLane) as (_, counting):
            assert isinstance(counting, CountingLane)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{config.port}", timeout=10) as client:
                assert (await client.get("/healthz")).status_code == 200
                streamed = await client.post(PATH, json=_body(stream=True, lab={"script": "a b"}))
                assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
                recorded = await client.post(PATH, json=_body(stream=True), headers={"X-Request-Id": "r1"})
                assert recorded.headers["x-request-id"] == "r1"
                assert (await client.get(PATH, params={"request": json.dumps(_body())})).status_code == 200
                assert (await client.post("/v1/other", json=_body())).status_code == 404
        return counting.served

    served = asyncio.run(main())
    # The recorded request was offered to the lane, which handed it to the ASGI app.
    assert served == [f"POST {PATH}", f"POST {PATH}"]


def test_no_lane_where_a_layer_must_see_every_request() -> None:
    from server.app import Service  # noqa: F401  (the lane's only dependency on the app)

    assert CompletionLane.for_config(None, ServerConfig(cors_origins=("http://a",))) is None  # type: ignore[arg-type]
    assert CompletionLane.for_config(None, ServerConfig(gzip_middleware=True)) is None  # type: ignore[arg-type]
    assert CompletionLane.for_config(None, ServerConfig(http="h11")) is None  # type: ignore[arg-type]
    assert CompletionLane.for_config(None, ServerConfig()) is not None  # type: ignore[arg-type]
