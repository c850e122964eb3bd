"""The reference for server CPU per token: a plain FastAPI streaming endpoint, the way most
OpenAI-compatible demos are written (an async generator of `json.dumps` SSE chunks in a
StreamingResponse, paced with asyncio.sleep), no engine, no lab features, same uvicorn and loop.

    python -m labs.bench.plain_server --port 8009

It answers POST /v1/chat/completions with `max_tokens` chunks at `lab.tokens_per_s` (the lab's
own body), each with `sent_at` so the lab's client measures it like the lab's server, and
GET /healthz for readiness. The benchmark runs both servers with the same streams in one run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

app = FastAPI()


def _chunk(delta: dict, finish: str | None = None, **extra: object) -> bytes:
    body = {"id": "chatcmpl-plain", "object": "chat.completion.chunk", "created": 0,
            "model": "plain", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra}
    return f"data: {json.dumps(body)}\n\n".encode()


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = json.loads(await request.body())
    tokens = int(body.get("max_tokens") or 16)
    rate = float((body.get("lab") or {}).get("tokens_per_s") or 20.0)
    words = ((body.get("lab") or {}).get("script") or "word " * tokens).split(" ")

    async def stream() -> AsyncIterator[bytes]:
        yield _chunk({"role": "assistant", "content": ""})
        start = time.monotonic()
        for i in range(tokens):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing: the requested tokens per second
            yield _chunk({"content": words[i % len(words)] + " "}, sent_at=time.time())
        yield _chunk({}, "length")
        yield b"data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def main() -> None:
    import gc

    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m labs.bench.plain_server")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()  # as the lab's server does: a fair comparison of the streaming path only
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", log_level="warning",
                backlog=4096)


if __name__ == "__main__":
    main()
