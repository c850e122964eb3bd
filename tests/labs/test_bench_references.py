"""The bare asyncio reference sends the lab server's own stream, so that the measuring client
does the same work for both (labs/bench/measuring_client.py): the role chunk, one content chunk
per event with its stamp, the finish chunk and `[DONE]`, each chunk with the lab's fields; and
the two stack floors (labs/bench/stack_floors.py) send the bare server's stream."""
from __future__ import annotations

import json

import httpx
import pytest

from labs.bench.measuring_client import bare_server
from server.stream.sse import ChunkFramer


def _fields(chunk: dict) -> tuple:
    """A chunk's shape: its keys, and its choice's keys (values vary by server)."""
    return tuple(sorted(chunk)), tuple(sorted(chunk["choices"][0])) if chunk.get("choices") else ()


def _lab_chunk(frame: bytes) -> dict:
    return json.loads(bytes(frame).removeprefix(b"data: "))  # unstamped: whole JSON, blank line


def test_the_bare_server_sends_the_lab_servers_stream() -> None:
    with bare_server() as url:
        reply = httpx.post(url, json={"n": 3, "interval": 0.01}, timeout=10)
    assert reply.status_code == 200 and reply.headers["content-type"] == "text/event-stream"
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]" and len(data) == 1 + 3 + 1 + 1
    role, *contents, finish = (json.loads(item) for item in data[:-1])
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"]["content"] for c in contents] == ["t0 ", "t1 ", "t2 "]
    assert all(isinstance(c["sent_at"], float) for c in contents)
    assert finish["choices"][0]["finish_reason"] == "length"

    framer = ChunkFramer("chatcmpl-x", 0, "tiny", "fp", stamp=False)
    assert _fields(role) == _fields(_lab_chunk(framer.role()))
    assert _fields(finish) == _fields(_lab_chunk(framer.finish("length")))
    lab_content = _lab_chunk(framer.content("t0 "))
    assert _fields({k: v for k, v in contents[0].items() if k != "sent_at"}) == _fields(lab_content)


@pytest.mark.parametrize("stack", ["uvicorn", "httptools"])
def test_the_stack_floors_send_the_bare_servers_stream(stack: str) -> None:
    """The raw ASGI app on uvicorn and the httptools protocol (labs/bench/stack_floors.py) answer
    with the bare server's stream, event for event: only the HTTP stack under it differs."""
    from labs.bench import references

    name = references.RAW_ASGI if stack == "uvicorn" else references.HTTPTOOLS
    with references.module_server(stack, "labs.bench.stack_floors", "--stack", stack) as (url, _):
        replies = [httpx.post(url, json={"n": 3, "interval": 0.01}, timeout=10) for _ in range(2)]
    with bare_server() as bare_url:
        bare = httpx.post(bare_url, json={"n": 3, "interval": 0.01}, timeout=10)
    assert references.reference_body(name, {"max_tokens": 3, "lab": {"tokens_per_s": 20.0}}) == {
        "n": 3, "interval": 0.05}
    for reply in replies:  # a second connection too: the server goes on serving
        assert reply.status_code == 200 and reply.headers["content-type"] == "text/event-stream"
        assert _unstamped(reply.text) == _unstamped(bare.text)


def _unstamped(text: str) -> list[str]:
    return [line.split(',"sent_at"')[0] for line in text.splitlines() if line]
