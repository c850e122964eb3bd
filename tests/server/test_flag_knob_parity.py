"""A server-wide flag and its per-request knob do the same thing, on the wire (issue 40, item 7).

docs/contract.md: each per-stream knob "is also a server-wide flag". For every knob that is both
(server/knobs.py STREAM_KNOBS), the same stream is read raw, chunk by chunk (each chunk is one
write of the server's), three ways: from a server started with the flag (`python -m server`'s
own argument parsing) and a request without the knob; from a default server and a request with
the knob; and from the default server without it. The first two must match byte for byte (the
per-request id, `created` and the Date header aside), and differ from the third, so a knob whose
case shows nothing cannot pass. The client's departure (`disconnect`) shows on the server, not on
the wire: there, the tokens generated after the client left are compared.
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import replace
from typing import Any

import pytest

from server import metrics
from server.__main__ import parse_args
from server.config import ServerConfig
from server.knobs import STREAM_KNOBS, flag_args
from server.processes import free_port
from tests.server.in_process import serving

PATH = "/v1/chat/completions"
JAPANESE = "日本語のテキスト"  # multi-byte characters that span tokens
READ_TIMEOUT_S = 10.0

# knob -> (its non-default value, the request's other lab fields that make it show, request fields)
CASES: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {
    "detokenizer": ("naive", {"script": JAPANESE}, {}),
    "stop_holdback": (False, {"script": "one two <|stop|> three"}, {"stop": ["<|stop|>"]}),
    # Pings every 50 ms through a 300 ms silence: their count depends on the loop's timing, so a
    # run of pings is compared as one (below); each way must show at least two.
    "heartbeat_s": (0.05, {"first_token_delay_s": 0.3}, {}),
    "error_mode:silent-close": ("silent-close", {"error_after_tokens": 2}, {}),
    "error_mode:fake-done": ("fake-done", {"error_after_tokens": 2}, {}),
    # A window far longer than the whole unpaced stream: its frames grouped into a write or two
    # (where the window falls is timing); without it, one write per frame.
    "coalesce_ms": (300.0, {}, {}),
    "omit_headers": (["X-Accel-Buffering"], {}, {}),
    "no_transform": (True, {}, {}),
    "event_ids": (True, {}, {}),
    "split_utf8_ms": (20.0, {"script": JAPANESE}, {}),
    # The role frame is a write of its own either way; what changes is when it leaves: with the
    # headers, or after the silence with the first token (timed: below).
    "role_chunk": ("with-first-token", {"first_token_delay_s": 0.4}, {}),
    "hello": (True, {}, {}),
    "stall_timeout_s": (0.1, {"pause_after_tokens": 2, "pause_s": 0.6}, {}),
}
TIMING_SHAPED = {"heartbeat_s", "coalesce_ms"}  # compared by content, their writes by shape
# Cases whose chunks are told apart by when they arrive: before or after half the silence (the
# margin is half the case's own first_token_delay_s either way).
TIMED = {"role_chunk"}


def knob_name(case: str) -> str:
    return case.split(":")[0]


def test_every_flagged_knob_has_a_case() -> None:
    assert {knob_name(case) for case in CASES} | {"disconnect"} == {k.name for k in STREAM_KNOBS}


def test_a_flag_sets_what_the_knob_sets() -> None:
    """The settings themselves: `python -m server FLAG` == the defaults with the request's knob."""
    from server.config import StreamSettings
    from server.apis.lab import LabOptions

    for case, (value, _, _) in {**CASES, "disconnect": ("ignore", {}, {})}.items():
        name = knob_name(case)
        by_flag = parse_args(flag_args({name: value})).stream
        by_knob = StreamSettings().merged(LabOptions.model_validate({name: value}).stream_overrides())
        assert by_flag == by_knob != StreamSettings(), case


def _request(lab: dict[str, Any], request: dict[str, Any]) -> bytes:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       "stream": True, "max_tokens": 16, **request,
                       "lab": {"script": "one two three four five six", **lab}}).encode()
    return (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def _chunks(port: int, request: bytes, leave_after: int | None = None,
                  times: list[float] | None = None) -> tuple[bytes, list[bytes]]:
    """The raw header block and the body's chunks as the server framed them (one per write);
    `leave_after`: close after that many chunks; `times`: gets each chunk's arrival, in seconds
    after the headers'."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            headers_at = time.monotonic()
            chunks: list[bytes] = []
            while leave_after is None or len(chunks) < leave_after:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    break
                chunks.append((await reader.readexactly(size + 2))[:-2])
                if times is not None:
                    times.append(time.monotonic() - headers_at)
            return head, chunks
    finally:
        writer.close()


def _normalized(head: bytes, chunks: list[bytes]) -> tuple[bytes, list[bytes]]:
    def clean(data: bytes) -> bytes:
        data = re.sub(rb"chatcmpl-[0-9a-f]+", b"chatcmpl-ID", data)
        return re.sub(rb'"created":\d+', b'"created":0', data)
    return re.sub(rb"(?im)^date: [^\r]*\r\n", b"", head), [clean(chunk) for chunk in chunks]


def _shape(case: str, chunks: list[bytes]) -> list[bytes]:
    """A timing-shaped knob's stream, its timing left out: a run of pings as one ping, the
    coalesced writes as one."""
    if case == "heartbeat_s":
        assert sum(chunk == b": ping\n\n" for chunk in chunks) >= 2, chunks
        return [c for i, c in enumerate(chunks) if not (c == b": ping\n\n" and chunks[i - 1] == c)]
    frames = b"".join(chunks).count(b"\n\n")
    assert 1 <= len(chunks) <= frames // 3, chunks  # grouped: never one write per frame
    return [b"".join(chunks)]


async def _read(port: int, case: str, request: bytes) -> tuple[bytes, list[Any]]:
    times: list[float] = []
    head, chunks = _normalized(*await _chunks(port, request, times=times))
    if case not in TIMED:
        return head, chunks
    late_s = CASES[case][1]["first_token_delay_s"] / 2
    return head, [(chunk, at >= late_s) for chunk, at in zip(chunks, times)]


async def _three_ways(model_dir: str, case: str) -> dict[str, tuple[bytes, list[Any]]]:
    value, lab, request = CASES[case]
    name = knob_name(case)
    default = replace(parse_args(["--engine", "synthetic", "--model", model_dir]),
                      port=free_port())
    flagged = replace(parse_args(["--engine", "synthetic", "--model", model_dir,
                                  *flag_args({name: value})]), port=free_port())
    seen = {}
    async with serving(flagged) as _:
        seen["flag"] = await _read(flagged.port, case, _request(lab, request))
    async with serving(default) as _:
        seen["knob"] = await _read(default.port, case, _request({**lab, name: value}, request))
        seen["neither"] = await _read(default.port, case, _request(lab, request))
    return seen


@pytest.mark.parametrize("case", list(CASES))
def test_the_flag_and_the_knob_send_the_same_stream(model_dir: str, case: str) -> None:
    seen = asyncio.run(_three_ways(model_dir, case))
    if case in TIMING_SHAPED:
        assert len(seen["neither"][1]) >= 6 or case != "coalesce_ms"  # one write per frame
        seen = {way: (head, _shape(case, chunks)) if way != "neither" else (head, chunks)
                for way, (head, chunks) in seen.items()}
    assert seen["flag"] == seen["knob"]
    assert seen["flag"] != seen["neither"]  # the case shows the knob: the comparison saw it


async def _tokens_after_departure(config: ServerConfig, lab: dict[str, Any]) -> float:
    """Leave after two chunks of a paced stream; the tokens generated for nobody once it ends."""
    before = metrics.TOKENS_AFTER_DISCONNECT._value.get()
    async with serving(config) as _:
        await _chunks(config.port, _request({"tokens_per_s": 50, **lab}, {}), leave_after=2)
        # The stream's end is polled: the server's own count of live streams back to 0.
        for _ in range(200):
            await asyncio.sleep(0.02)  # poll interval
            if metrics.ACTIVE_STREAMS._value.get() == 0:
                break
        assert metrics.ACTIVE_STREAMS._value.get() == 0
    return metrics.TOKENS_AFTER_DISCONNECT._value.get() - before


def test_the_disconnect_flag_and_knob_both_generate_for_nobody(model_dir: str) -> None:
    base = ["--engine", "synthetic", "--model", model_dir]

    async def main() -> dict[str, float]:
        return {
            "flag": await _tokens_after_departure(
                replace(parse_args([*base, *flag_args({"disconnect": "ignore"})]), port=free_port()), {}),
            "knob": await _tokens_after_departure(
                replace(parse_args(base), port=free_port()), {"disconnect": "ignore"}),
            "neither": await _tokens_after_departure(replace(parse_args(base), port=free_port()), {}),
        }
    after = asyncio.run(main())
    # 16 tokens at 50/s, the client gone after the role frame and the first: the rest (measured:
    # 15 both ways) are generated for nobody; aborted, none is (a step in flight at most). The
    # departure is heard within a token interval, so the two ways may differ by one.
    assert after["flag"] >= 3 and after["knob"] >= 3 and abs(after["flag"] - after["knob"]) <= 1, after
    assert after["neither"] <= 1, after
