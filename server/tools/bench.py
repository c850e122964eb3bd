"""Server CPU per streamed token: framing alone, then the whole request path.

    python -m server.tools.bench [--json PATH] [--tokens N]

1. framing: `ChunkFramer.content` alone, and json.dumps of the same chunk for comparison;
2. stream path in-process: engine token -> detokenizer -> stop handling -> frame -> ASGI send,
   with a generation that yields at once and a send that drops the bytes (no socket);
3. whole path: `python -m server --engine synthetic` on loopback, 1 and 100 concurrent streams
   from a lean asyncio client (one connection per stream, no pool to run out of), server CPU
   read from /proc/PID/stat (user + system, every thread: HTTP, event loop and decode loop).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator

from server.apis.chat import CHAT_WIRE
from server.config import StreamSettings
from server.engine.base import Generation, TokenEvent
from server.stream import sse
from server.stream.sse_writer import SSECompletion
from server.stream.streaming import CompletionJob, CompletionText
from server.text.stops import NoStops

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def bench_framing(tokens: int) -> dict[str, float]:
    framer = sse.ChunkFramer("chatcmpl-0123456789abcdef", 1700000000, "tiny", "fp_streamlab_x")
    pieces = ["Hello", " wor", "ld", " 🦩", "と", ",", " and", " more"] * (tokens // 8)
    started = time.perf_counter()
    for piece in pieces:
        framer.content(piece)
    template_us = (time.perf_counter() - started) / len(pieces) * 1e6
    chunk = {"id": "chatcmpl-0123456789abcdef", "object": "chat.completion.chunk",
             "created": 1700000000, "model": "tiny", "system_fingerprint": "fp_streamlab_x",
             "choices": [{"index": 0, "delta": {"content": ""}, "logprobs": None,
                          "finish_reason": None}]}
    started = time.perf_counter()
    for piece in pieces:
        chunk["choices"][0]["delta"]["content"] = piece
        b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"
    dumps_us = (time.perf_counter() - started) / len(pieces) * 1e6
    return {"template_us_per_frame": template_us, "json_dumps_us_per_frame": dumps_us}


class _InstantGeneration(Generation):
    """Yields its tokens without waiting: what is left to measure is the HTTP layer itself."""

    def __init__(self, ids: list[int]) -> None:
        self._ids = ids
        self.finish_reason = None

    async def _iterate(self) -> AsyncIterator[TokenEvent]:
        for index, token_id in enumerate(self._ids):
            yield TokenEvent(token_id, index)
        self.finish_reason = "length"

    def __aiter__(self) -> AsyncIterator[TokenEvent]:
        return self._iterate()

    def cancel(self, reason: str = "disconnect") -> None:
        pass

    @property
    def prompt_tokens(self) -> int:
        return 10

    @property
    def completion_tokens(self) -> int:
        return len(self._ids)


def bench_stream_path(tokens: int) -> dict[str, float]:
    """engine token -> detokenizer -> stops -> frame -> send (a no-op), per token."""
    from server.text.detokenizer import ByteLevelDetokenizer

    table = [bytes([b]) for b in range(256)] + [b"Hello", b" world", b"\xf0\x9f", b"\xa6\xa9"]
    ids = [256, 257, 258, 259, 32, 97] * (tokens // 6)
    sent = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent += len(message.get("body", b""))

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client never leaves
        return {"type": "http.disconnect"}

    async def run() -> float:
        job = CompletionJob(
            generation=_InstantGeneration(ids),
            text=CompletionText(ByteLevelDetokenizer(table), NoStops()),
            settings=StreamSettings(heartbeat_s=None), completion_id="chatcmpl-bench",
            created=1700000000, model="tiny", system_fingerprint="fp_bench",
            arrived_at=time.monotonic(), wire=CHAT_WIRE)
        started = time.process_time()
        await SSECompletion(job)({"type": "http"}, receive, send)
        return time.process_time() - started

    cpu_s = asyncio.run(run())
    return {"stream_path_us_per_token": cpu_s / len(ids) * 1e6, "bytes_per_token": sent / len(ids)}


def _cpu_s(stat_path: Path) -> tuple[float, float]:
    """(user, system) CPU seconds from a /proc stat file (fields 14 and 15)."""
    fields = stat_path.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def _server_cpu(pid: int) -> dict[str, float]:
    """CPU of the whole server process, and of its main thread (the event loop: HTTP parsing,
    the stream path, socket writes). The other threads are the engine's decode loop."""
    user, system = _cpu_s(Path(f"/proc/{pid}/stat"))
    main_user, main_system = _cpu_s(Path(f"/proc/{pid}/task/{pid}/stat"))
    return {"user": user, "system": system, "main_thread": main_user + main_system}


async def _one_stream(port: int, body: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\n"
                 b"content-type: application/json\r\nconnection: close\r\n"
                 b"content-length: %d\r\n\r\n" % len(body) + body)
    received = 0
    while True:
        data = await reader.read(65536)
        if not data:
            break
        received += len(data)
    writer.close()
    return received


# The tiny model's context is 2,048 tokens: longer runs are several streams one after another.
MAX_TOKENS_PER_STREAM = 2000


async def _streams(port: int, concurrency: int, tokens: int, lab: dict[str, Any]) -> int:
    received = 0
    while tokens > 0:
        per_stream = min(tokens, MAX_TOKENS_PER_STREAM)
        tokens -= per_stream
        body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "bench"}],
                           "stream": True, "max_tokens": per_stream, "lab": lab}).encode()
        sizes = await asyncio.gather(*(_one_stream(port, body) for _ in range(concurrency)))
        received += sum(sizes)
    return received


def bench_whole_path(concurrency: int, tokens_per_stream: int,
                     lab: dict[str, Any] | None = None) -> dict[str, float]:
    from server.launcher import running_server

    args = ["--engine", "synthetic", "--slots", str(max(8, concurrency)), "--max-queue", "0",
            "--log-level", "warning"]
    with running_server(args) as server:
        asyncio.run(_streams(server.port, 1, 5, {}))  # warm-up: imports, first-request paths
        before_tokens = server.metrics()["streamlab_tokens_generated_total"]
        before_writes = server.metrics().get("streamlab_stream_writes_total", 0.0)
        cpu_before = _server_cpu(server.process.pid)
        started = time.perf_counter()
        received = asyncio.run(_streams(server.port, concurrency, tokens_per_stream, lab or {}))
        wall_s = time.perf_counter() - started
        cpu_after = _server_cpu(server.process.pid)
        cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_before}
        after = server.metrics()
        tokens = after["streamlab_tokens_generated_total"] - before_tokens
        writes = after.get("streamlab_stream_writes_total", 0.0) - before_writes
    per_token = 1e6 / tokens
    return {"concurrency": concurrency, "tokens": tokens, "wall_s": wall_s,
            "server_cpu_s": cpu["user"] + cpu["system"],
            "server_cpu_us_per_token": (cpu["user"] + cpu["system"]) * per_token,
            "user_us_per_token": cpu["user"] * per_token,
            "system_us_per_token": cpu["system"] * per_token,
            "event_loop_thread_us_per_token": cpu["main_thread"] * per_token,
            "tokens_per_s": tokens / wall_s, "writes_per_token": writes / tokens,
            "bytes_received": received}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.tools.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--tokens", type=int, default=20_000, help="tokens per measurement")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    results["framing"] = bench_framing(args.tokens * 10)
    results["stream_path"] = bench_stream_path(args.tokens * 5)
    results["whole_path_1_stream"] = bench_whole_path(1, args.tokens)
    results["whole_path_100_streams"] = bench_whole_path(100, args.tokens // 100)
    results["whole_path_100_streams_coalesce_25ms"] = bench_whole_path(
        100, args.tokens // 100, {"coalesce_ms": 25})
    framing, path = results["framing"], results["stream_path"]
    print(f"framing, template:        {framing['template_us_per_frame']:6.2f} us/frame "
          f"(json.dumps: {framing['json_dumps_us_per_frame']:.2f})")
    print(f"stream path, no socket:   {path['stream_path_us_per_token']:6.2f} us/token "
          f"(detokenize + stops + frame + ASGI send)")
    for key in ("whole_path_1_stream", "whole_path_100_streams", "whole_path_100_streams_coalesce_25ms"):
        r = results[key]
        print(f"{key:36s} {r['server_cpu_us_per_token']:5.1f} us server CPU/token "
              f"(user {r['user_us_per_token']:.1f}, sys {r['system_us_per_token']:.1f}; event-loop "
              f"thread {r['event_loop_thread_us_per_token']:.1f}), {r['tokens_per_s']:6.0f} tok/s, "
              f"{r['writes_per_token']:.2f} writes/token")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
