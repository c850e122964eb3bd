"""How the relay forwards the upstream's body, one row per mode: what it does, where a real relay
did it. `relay_app.py` runs them; the settings' `mode` names one.

Each mode is an async generator over the upstream httpx response: the bytes it yields are what the
client gets, one write each. Every mode but `iter-raw` reads with `aiter_lines()`, which hands
over each line as soon as its newline arrives (httpx's LineDecoder: `\n`, `\r\n` or `\r`), and
writes it back with a `\n`: byte-exact for the lab's server, which ends its lines with `\n`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Callable

import httpx

HTTPX_RAW = "https://www.python-httpx.org/api/#response"
UNITY_GATEWAY = "https://github.com/databricks/unity-gateway/issues/361"
CLAUDE_CODE_PROXY = "https://github.com/seifghazi/claude-code-proxy/issues/32"
LITELLM_EVENT_LINES = "https://github.com/BerriAI/litellm/issues/41826"
AI_GATEWAY_PING = "https://github.com/envoyproxy/ai-gateway/issues/2548"
SSE_SPEC = "https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation"

# httpx's `iter_raw()`/`aiter_raw()` with a chunk size yield only whole chunks of that many bytes
# (its ByteChunker), the last one at the end of the body: unity-gateway#361 read with 8192.
DEFAULT_CHUNK_BYTES = 8192

Forward = Callable[[httpx.Response, int], AsyncIterator[bytes]]


async def _lines(upstream: httpx.Response, _chunk: int) -> AsyncIterator[bytes]:
    async for line in upstream.aiter_lines():
        yield f"{line}\n".encode()


async def _iter_raw(upstream: httpx.Response, chunk: int) -> AsyncIterator[bytes]:
    async for piece in upstream.aiter_raw(chunk):
        yield piece


async def _data_only(upstream: httpx.Response, _chunk: int) -> AsyncIterator[bytes]:
    async for line in upstream.aiter_lines():
        if not line or line.startswith("data:"):
            yield f"{line}\n".encode()


def _is_ping(line: str) -> bool:
    """A keep-alive: an SSE comment (`: ping`) or the line that names an Anthropic `ping` event."""
    return line.startswith(":") or line.replace(" ", "") == "event:ping"


async def _drop_pings(upstream: httpx.Response, _chunk: int) -> AsyncIterator[bytes]:
    in_ping = False  # inside a named ping event: its data line and the blank line that ends it go too
    async for line in upstream.aiter_lines():
        if _is_ping(line):
            in_ping = in_ping or not line.startswith(":")
            continue
        if in_ping:
            in_ping = bool(line)
            continue
        yield f"{line}\n".encode()


@dataclass(frozen=True)
class Mode:
    name: str
    forward: Forward
    does: str  # one sentence: what the client gets
    source: str  # where a real relay did it (or the reference the control follows)


MODES: dict[str, Mode] = {mode.name: mode for mode in (
    Mode("lines", _lines,
         "forwards each line as its newline arrives (`aiter_lines()`): the relay that streams, the control",
         SSE_SPEC),
    Mode("iter-raw", _iter_raw,
         "reads the upstream with `aiter_raw(chunk_bytes)`, which yields only whole chunks: comments "
         "and small events wait until that many bytes have piled up or the body ends",
         UNITY_GATEWAY),
    Mode("data-only", _data_only,
         "forwards only `data:` lines and blank lines, dropping `event:`, `id:` and comment lines: "
         "named events (Anthropic's, Responses') arrive nameless",
         CLAUDE_CODE_PROXY),
    Mode("drop-pings", _drop_pings,
         "forwards every line but the keep-alives: `: ping` comments and `event: ping` events, as a "
         "gateway that re-emits only the events it translates",
         AI_GATEWAY_PING),
)}
MODE_NAMES: tuple[str, ...] = tuple(MODES)
