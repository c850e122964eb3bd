"""What a stream may ask of the connection serving it, beyond the ASGI spec: the names it looks
for in its ASGI scope's `extensions`.

The stream (server/stream/streaming.py, server/stream/sse_writer.py) uses each one when it is
there and falls back to plain ASGI when it is not (another server, a test, a layer that sees every
message). The connection offers them: server/http/cycle_extensions.py implements them on uvicorn's
request cycle and server/http/connections.py sets them per request. The names live here, below
both, so that the stream reads them without importing the HTTP edge.

* `streamlab.abort`: cut the connection now, unflushed;
* `streamlab.body_send`: uvicorn's own `send`, past the layers that only watch the start;
* `streamlab.on_departure`: be called when the client's connection is lost;
* `streamlab.gather`: writes made in one instant leave in one socket write;
* `streamlab.write_now`: a body write without a coroutine, for tokens written from the engine's
  hand-over.
"""
from __future__ import annotations

# Set in every request's ASGI scope: abort the connection at once, unflushed. A stream blocked on
# a client that does not read ends this way (a close would wait for the buffer to drain).
ABORT_EXTENSION = "streamlab.abort"
# Also set: uvicorn's own `send` of the request, for a stream's body writes (server/stream/sse_writer.py).
# Between it and the app sit only layers that watch the response start (the error middlewares,
# the body limit, CORS); each wrapped every body write in a coroutine of its own, a few per
# token. A layer that does look at body messages (the records, the gzip failure mode) removes it
# from the scope (server/http/cycle_extensions.py `without_body_send`), and the writes go through it.
BODY_SEND_EXTENSION = "streamlab.body_send"
# Also set (httptools): `on_departure(callback)`, the callback called when the client's connection
# is lost before the response is complete (at once if it already is). A stream hears its
# client leave from the connection itself, instead of from a task waiting on `receive()`.
# Removed with the body send by a layer that sees every message (it may watch `receive()`).
DEPARTURE_EXTENSION = "streamlab.on_departure"
# Also set (httptools): `gather()`, a context in which the response's writes are kept and leave
# in one socket write when it ends: the headers with the role frame, the finish frame with
# `[DONE]` and the body's end. Each write on loopback is a send() and the receiver's wake-up.
GATHER_EXTENSION = "streamlab.gather"
# Also set (httptools): `write_now`, a stream's body writes without a coroutine, for the tokens
# the engine hands over while the stream waits for them (server/stream/streaming.py `_take`): no
# task wake-up per token. `ready()` says whether a write may go now (headers sent, chunked, the
# client connected and reading); otherwise the token goes the awaited way.
WRITE_NOW_EXTENSION = "streamlab.write_now"
