"""Two reference servers that place the lab server's cost on its HTTP stack, in one run
(labs/bench/references.py). Both send labs/bench/reference_stream.py's stream, as the bare asyncio
server does, and do nothing else:

* `raw ASGI on uvicorn`: an ASGI callable with no framework, under the uvicorn, httptools and
  uvloop the lab's server runs on. Nothing an app on this stack does costs less: above it is
  the lab's own work (validation, admission, the engine's thread, the stream, the metrics).
  ASGI writes the response head by itself, so its stream takes 6 writes where the others
  gather theirs into 5;
* `httptools protocol`: an asyncio protocol straight on httptools' parser, the way uvicorn reads
  requests, without uvicorn's request cycle: the floor of an HTTP layer of one's own.

    python -m labs.bench.stack_floors --stack uvicorn --port 8011
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
from typing import Any, Sequence

from labs.bench import reference_stream as stream

_HEADERS = [(b"content-type", stream.CONTENT_TYPE)]


async def raw_asgi_app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    spec = json.loads(body)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": stream.ROLE, "more_body": True})
    for i in range(spec["n"]):
        if i:
            await asyncio.sleep(spec["interval"])
        await send({"type": "http.response.body", "body": stream.content(i), "more_body": True})
    await send({"type": "http.response.body", "body": stream.FINISH + stream.DONE, "more_body": False})


class HttptoolsStream(asyncio.Protocol):
    """One connection: its request parsed by httptools and answered with the reference stream,
    then the connection closed (as the bare server does)."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.reply: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        import httptools

        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            self.transport.close()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.reply is not None:
            return  # one request per connection, as the bare server: a pipelined one is ignored
        spec = json.loads(b"".join(self.body))
        # Kept: the loop holds only a weak reference to a task.
        self.reply = asyncio.get_running_loop().create_task(self._reply(spec["n"], spec["interval"]))

    async def _reply(self, n: int, interval: float) -> None:
        transport = self.transport
        assert transport is not None
        transport.write(stream.RESPONSE_HEAD + stream.chunk(stream.ROLE))
        for i in range(n):
            if i:
                await asyncio.sleep(interval)
            if transport.is_closing():
                return
            transport.write(stream.chunk(stream.content(i)))
        transport.write(stream.TAIL)
        transport.close()


async def _serve_httptools(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(HttptoolsStream, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> None:
    import uvloop

    parser = argparse.ArgumentParser(prog="python -m labs.bench.stack_floors")
    parser.add_argument("--stack", choices=("uvicorn", "httptools"), required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    gc.collect()
    gc.freeze()  # as the lab's server does: the streaming path only
    if args.stack == "httptools":
        uvloop.run(_serve_httptools(args.port))
        return
    import uvicorn

    uvicorn.run(raw_asgi_app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                log_level="warning", access_log=False, lifespan="off", backlog=4096)


if __name__ == "__main__":
    main()
