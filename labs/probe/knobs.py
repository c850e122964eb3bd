"""What the probe asks the origin for: the request bodies of each check, and their pacing.

With a canary origin (the lab's server) every body carries `lab` knobs (docs/contract.md): an exact
script, a token rate, a silence at a chosen place, a stamp on each event. The server is asked to
behave the way that exposes faults (labs.lab.exposing, as verify asks it): no
`X-Accel-Buffering: no` header and no heartbeats unless a check needs them.

Against any other origin the body is an ordinary request with a token limit. Every body is in the
protocol the run speaks (`--api`: labs/client/apis builds it).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from labs.client.apis import DEFAULT_API, client_api
from labs.lab import exposing
from labs.lab.server import DEFAULT_SCRIPT, DEFAULT_TOKENS_PER_S

PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
# An ordinary request for an origin the probe cannot steer: long enough to see how it streams.
PLAIN_PROMPT = [{"role": "user", "content": "Count from 1 to 60 in words, separated by spaces."}]
PLAIN_MAX_TOKENS = 96

# The stream the buffering, coalescing and compression checks judge: the lab's default script
# and pace (one event per token, 10 per second, as the catalogue's workloads), stamped with the
# server's send time. It asks for no silence before its first token.
STREAM_KNOBS: dict[str, Any] = {"script": DEFAULT_SCRIPT, "tokens_per_s": DEFAULT_TOKENS_PER_S,
                                "stamp": True}
STREAM_INTERVAL_S = 1.0 / DEFAULT_TOKENS_PER_S

# Silences: a few tokens around the silence, fast, so a try costs little more than the silence.
SILENCE_TOKENS_PER_S = 20.0
SILENCE_SCRIPT = "One two three four five six."
MID_STREAM_AFTER_TOKENS = 2

# The long stream: slow tokens, and heartbeats often enough to keep any idle timer of a second
# or more quiet, so only a limit on the whole response can end it. A byte every 0.1 s also
# bounds the error of the limit read from the last byte.
LONG_TOKENS_PER_S = 4.0
LONG_HEARTBEAT_S = 0.1

# The departure: leave after a few events; the server pauses one token later, because some
# proxies notice a client that left only when their next write to it fails.
LEAVE_AFTER_EVENTS = 3
LEAVE_TOKENS_PER_S = 20.0
LEAVE_PAUSE_AFTER_TOKENS = 4
LEAVE_PAUSE_S = 2.0
LEAVE_SCRIPT = " ".join([DEFAULT_SCRIPT] * 3)

# Concurrent streams: each about one second long.
BURST_TOKENS_PER_S = 10.0
BURST_SCRIPT = "A token stream should reach the reader one token at a time."


def canary_body(model: str, lab: Mapping[str, Any], *, max_tokens: int = 1024,
                api: str = DEFAULT_API) -> dict[str, Any]:
    return client_api(api).body(model, PROMPT, max_tokens, {**exposing.EXPOSING, **lab})


def plain_body(model: str, api: str = DEFAULT_API) -> dict[str, Any]:
    return client_api(api).body(model, PLAIN_PROMPT, PLAIN_MAX_TOKENS)


def stream_body(model: str, api: str = DEFAULT_API) -> dict[str, Any]:
    return canary_body(model, STREAM_KNOBS, api=api)


def silence_body(model: str, position: str, silence_s: float, api: str = DEFAULT_API) -> dict[str, Any]:
    """A short stream with one silence of `silence_s` at `position` (see silence.POSITIONS)."""
    lab: dict[str, Any] = {"script": SILENCE_SCRIPT, "tokens_per_s": SILENCE_TOKENS_PER_S}
    if position == "before-headers":
        lab["headers_delay_s"] = round(silence_s, 3)
    elif position == "after-headers":
        # The headers, then nothing at all (the role chunk waits for the first token, as vLLM
        # sends it): a hop that holds headers until the first body byte shows (held_headers.py).
        lab.update(first_token_delay_s=round(silence_s, 3), role_chunk="with-first-token")
    elif position == "mid-stream":
        lab.update(pause_after_tokens=MID_STREAM_AFTER_TOKENS, pause_s=round(silence_s, 3))
    else:
        raise ValueError(f"unknown silence position {position!r}")
    return canary_body(model, lab, api=api)


def long_tokens(duration_s: float) -> int:
    return math.ceil(duration_s * LONG_TOKENS_PER_S)


def long_body(model: str, duration_s: float, api: str = DEFAULT_API) -> dict[str, Any]:
    """A stream of about `duration_s`, heartbeats on (`max_tokens` ends it; the script is ample)."""
    tokens = long_tokens(duration_s)
    words = DEFAULT_SCRIPT.split()
    script = " ".join(words[i % len(words)] for i in range(tokens + len(words)))
    return canary_body(model, {"script": script, "tokens_per_s": LONG_TOKENS_PER_S,
                               "heartbeat_s": LONG_HEARTBEAT_S}, max_tokens=tokens, api=api)


def leave_body(model: str, pause_s: float, api: str = DEFAULT_API) -> dict[str, Any]:
    return canary_body(model, {"script": LEAVE_SCRIPT, "tokens_per_s": LEAVE_TOKENS_PER_S,
                               "pause_after_tokens": LEAVE_PAUSE_AFTER_TOKENS,
                               "pause_s": round(pause_s, 3)}, api=api)


def burst_body(model: str, api: str = DEFAULT_API) -> dict[str, Any]:
    return canary_body(model, {"script": BURST_SCRIPT, "tokens_per_s": BURST_TOKENS_PER_S}, api=api)
