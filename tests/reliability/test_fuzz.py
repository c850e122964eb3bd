"""Property-based fuzzing of the request body (hypothesis, bounded in examples and time): whatever
arrives, the answer is never a 5xx and the engine never dies."""
from __future__ import annotations

import http.client
import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.knobs import KNOBS, MAX_TOKENS, MAX_WAIT_S
from tests.reliability.conftest import assert_server_fine

# Bounded: a few seconds on an idle machine; no database written into the checkout.
FUZZ = settings(max_examples=150, deadline=None, database=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow])
# What the client waits for an answer: a generated pause may hold a stream for a day, which is
# an accepted request, not a failure. The client then leaves, and the server must notice.
PATIENCE_S = 1.0

leaves = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1.4e-45, 1e-300, 3.4028235e38, 1e308, MAX_WAIT_S,
                     MAX_WAIT_S + 1, float(MAX_TOKENS)]),
    st.text(max_size=40))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


def knob_value(knob: Any) -> st.SearchStrategy[Any]:
    """Mostly values near the knob's own edges, sometimes anything at all."""
    edges: list[Any] = [None]
    for bound in (knob.minimum, knob.maximum, knob.smallest_on):
        if bound is not None:
            edges += [bound, bound * (1 + 1e-9), bound * (1 - 1e-9), -bound]
    if knob.choices:
        edges += list(knob.choices) + [c.upper() for c in knob.choices] + [list(knob.choices)]
    return st.one_of(st.sampled_from(edges), values)


labs = st.fixed_dictionaries({}, optional={**{k.name: knob_value(k) for k in KNOBS},
                                          "tokens_per_sec": values})
messages = st.one_of(
    st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant",
                                                             "tool", "wizard"]),
                                    "content": st.one_of(st.text(max_size=60), values)}),
             min_size=0, max_size=3),
    values)
bodies = st.fixed_dictionaries(
    {"model": st.one_of(st.just("tiny"), values), "messages": messages},
    optional={"stream": st.one_of(st.booleans(), values),
              "max_tokens": st.one_of(st.integers(-3, 24), values),
              "max_completion_tokens": st.one_of(st.integers(-3, 24), values),
              "temperature": st.one_of(st.floats(-1, 3), values),
              "top_p": st.one_of(st.floats(-1, 2), values),
              "seed": st.one_of(st.integers(-(2**65), 2**65), values),
              "stop": st.one_of(st.text(max_size=5), st.lists(st.text(max_size=5), max_size=6),
                                values),
              "n": st.one_of(st.integers(-1, 3), values),
              "stream_options": st.one_of(st.fixed_dictionaries(
                  {}, optional={"include_usage": st.one_of(st.booleans(), values)}), values),
              "lab": st.one_of(labs, values)})


def send(server: Any, body: bytes) -> int | None:
    """The status, or None when nothing complete came within PATIENCE_S (the client leaves)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=PATIENCE_S)
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline and response.read(4096):
            pass
        return response.status
    except (TimeoutError, OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def encode(body: dict[str, Any]) -> bytes:
    if "max_tokens" not in body and "max_completion_tokens" not in body:
        body = {**body, "max_tokens": 3}  # an unbounded answer is slow, not hostile
    return json.dumps(body, allow_nan=True).encode()


def healthy(server: Any) -> bool:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


def test_no_body_gets_a_5xx_or_kills_the_engine(hardened) -> None:
    seen: list[int | None] = []

    @FUZZ
    @given(body=bodies)
    def one_body(body: dict[str, Any]) -> None:
        status = send(hardened, encode(body))
        seen.append(status)
        assert status is None or status < 500, (status, body)
        assert healthy(hardened), hardened.log_tail()

    one_body()
    # The fuzzing reached both sides: bodies refused and bodies served.
    assert any(s == 200 for s in seen) and any(s == 400 for s in seen), seen
    assert_server_fine(hardened)
