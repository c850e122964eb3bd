"""The table of hostile inputs: each a request body (bytes, so NaN literals and broken UTF-8 fit),
optional headers, and what the server must answer.

Expectations:
* a status (400, 404, 413, 415): a clear OpenAI-style error, before any byte of a stream;
* SERVE: a 200 whose stream ends with [DONE] (clamped or honoured: the value is in range);
* HOLD: a value in range that keeps the stream waiting for a long time (a day-long pause,
  a rate of one token per 1,000 s): the client sees the start (or nothing, for headers_delay_s)
  and leaves; the server must notice and free everything.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from server.knobs import MAX_TOKENS, MAX_WAIT_S

SERVE = "serve"
HOLD = "hold"

F32_MAX = 3.4028234663852886e38
F32_TINY = 1.401298464324817e-45  # the smallest float32 subnormal
F64_TINY = 5e-324  # the smallest float64 subnormal


@dataclass(frozen=True)
class Case:
    id: str
    body: bytes
    expect: int | str
    headers: dict[str, str | None] = field(default_factory=dict)


def body(fields: dict[str, Any] | None = None, *, raw: str | None = None, stream: bool = True,
         **extra: Any) -> bytes:
    """A good request with these fields (or raw JSON text spliced in as the last fields)."""
    base: dict[str, Any] = {"model": "tiny", "stream": stream, "max_tokens": 4,
                            "messages": [{"role": "user", "content": "hi"}]}
    base.update(fields or {})
    base.update(extra)
    text = json.dumps(base)
    if raw is not None:
        text = text[:-1] + ", " + raw + "}"
    return text.encode()


def lab(**fields: Any) -> bytes:
    return body({"lab": fields})


def case(id: str, payload: bytes, expect: int | str, **headers: str | None) -> Case:
    return Case(id, payload, expect, {k.replace("_", "-"): v for k, v in headers.items()})


HUGE = 10 ** 400  # a JSON integer no machine type holds

CASES: list[Case] = [
    # Sampling: OpenAI's ranges, float32 and float64 edges, non-finite, wrong types.
    case("temperature-zero", body(temperature=0), SERVE),
    case("temperature-negative-zero", body(temperature=-0.0), SERVE),
    case("temperature-max", body(temperature=2), SERVE),
    case("temperature-over-max", body(temperature=2.0000001), 400),
    case("temperature-f32-subnormal", body(temperature=F32_TINY), SERVE),
    case("temperature-f64-subnormal", body(temperature=F64_TINY), SERVE),
    case("temperature-just-above-greedy", body(temperature=1.0001e-5), SERVE),
    case("temperature-f64-max", body(temperature=1.7976931348623157e308), 400),
    case("temperature-nan", body(raw='"temperature": NaN'), 400),
    case("temperature-infinity", body(raw='"temperature": Infinity'), 400),
    case("temperature-overflowing-literal", body(raw='"temperature": 1e999'), 400),
    case("temperature-string", body(temperature="1"), 400),
    case("temperature-bool", body(temperature=True), 400),
    case("top-p-1e-300", body(top_p=1e-300), SERVE),
    case("top-p-f32-subnormal", body(top_p=F32_TINY), SERVE),
    case("top-p-f64-subnormal", body(top_p=F64_TINY), SERVE),
    case("top-p-1e-300-hot", body(top_p=1e-300, temperature=2), SERVE),
    case("top-p-one", body(top_p=1), SERVE),
    case("top-p-zero", body(top_p=0), 400),
    case("top-p-negative", body(top_p=-1e-300), 400),
    case("top-p-over-one", body(top_p=1.0000001), 400),
    case("top-p-f32-max", body(top_p=F32_MAX), 400),
    case("top-p-nan", body(raw='"top_p": NaN'), 400),
    # 64-bit edges.
    case("seed-int64-max", body(seed=2**63 - 1), SERVE),
    case("seed-int64-min", body(seed=-(2**63)), SERVE),
    case("seed-2-63", body(seed=2**63), 400),
    case("seed-2-64", body(seed=2**64), 400),
    case("seed-below-int64", body(seed=-(2**63) - 1), 400),
    case("seed-huge", body(seed=HUGE), 400),
    case("seed-float", body(seed=1.5), 400),
    case("seed-string", body(seed="7"), 400),
    case("max-tokens-2-31", body(max_tokens=2**31), 400),
    case("max-tokens-2-63", body(max_tokens=2**63), 400),
    case("max-tokens-2-64", body(max_tokens=2**64), 400),
    case("max-tokens-huge", body(max_tokens=HUGE), 400),
    case("max-tokens-int64-min", body(max_tokens=-(2**63)), 400),
    case("max-tokens-float", body(max_tokens=4.0), 400),
    case("max-completion-tokens-2-64", body(max_completion_tokens=2**64), 400),
    case("n-2-64", body(n=2**64), 400),
    case("n-zero", body(n=0), 400),
    # Every lab field at both ends of its range, and just past them.
    case("lab-rate-1e-10", lab(tokens_per_s=1e-10), 400),
    case("lab-rate-below-min", lab(tokens_per_s=0.00099), 400),
    case("lab-rate-min", lab(tokens_per_s=0.001), HOLD),
    case("lab-rate-max", lab(tokens_per_s=1_000_000), SERVE),
    case("lab-rate-over-max", lab(tokens_per_s=1_000_001), 400),
    case("lab-rate-zero", lab(tokens_per_s=0), 400),
    case("lab-rate-f64-max", lab(tokens_per_s=1.7976931348623157e308), 400),
    case("lab-headers-delay-zero", lab(headers_delay_s=0), SERVE),
    case("lab-headers-delay-max", lab(headers_delay_s=MAX_WAIT_S), HOLD),
    case("lab-headers-delay-over-max", lab(headers_delay_s=MAX_WAIT_S + 0.001), 400),
    case("lab-headers-delay-negative", lab(headers_delay_s=-1e-9), 400),
    case("lab-first-token-delay-max", lab(first_token_delay_s=MAX_WAIT_S), HOLD),
    case("lab-first-token-delay-1e9", lab(first_token_delay_s=1e9), 400),
    case("lab-pause-max", lab(pause_after_tokens=1, pause_s=MAX_WAIT_S), HOLD),
    case("lab-pause-over-max", lab(pause_after_tokens=1, pause_s=MAX_WAIT_S + 1), 400),
    case("lab-pause-nan", body(raw='"lab": {"pause_s": NaN}'), 400),
    case("lab-pause-after-zero", lab(pause_after_tokens=0, pause_s=0), SERVE),
    case("lab-pause-after-max", lab(pause_after_tokens=MAX_TOKENS, pause_s=MAX_WAIT_S), SERVE),
    case("lab-pause-after-over-max", lab(pause_after_tokens=MAX_TOKENS + 1), 400),
    case("lab-pause-after-negative", lab(pause_after_tokens=-1), 400),
    case("lab-pause-after-2-64", lab(pause_after_tokens=2**64), 400),
    case("lab-error-after-zero", lab(error_after_tokens=0), SERVE),
    case("lab-error-after-max", lab(error_after_tokens=MAX_TOKENS), SERVE),
    case("lab-error-after-2-64", lab(error_after_tokens=2**64), 400),
    case("lab-abort-after-zero", lab(abort_after_tokens=0), HOLD),
    case("lab-abort-after-max", lab(abort_after_tokens=MAX_TOKENS), SERVE),
    case("lab-abort-after-2-63", lab(abort_after_tokens=2**63), 400),
    case("lab-heartbeat-off", lab(heartbeat_s=0), SERVE),
    case("lab-heartbeat-null", lab(heartbeat_s=None), SERVE),
    case("lab-heartbeat-min", lab(heartbeat_s=0.01), SERVE),
    case("lab-heartbeat-below-min", lab(heartbeat_s=0.001), 400),
    case("lab-heartbeat-max", lab(heartbeat_s=MAX_WAIT_S), SERVE),
    case("lab-heartbeat-over-max", lab(heartbeat_s=MAX_WAIT_S + 1), 400),
    case("lab-heartbeat-infinity", body(raw='"lab": {"heartbeat_s": Infinity}'), 400),
    case("lab-stall-min", lab(stall_timeout_s=0.01), SERVE),
    case("lab-stall-max", lab(stall_timeout_s=MAX_WAIT_S), SERVE),
    case("lab-stall-below-min", lab(stall_timeout_s=1e-5), 400),
    case("lab-coalesce-zero", lab(coalesce_ms=0), SERVE),
    case("lab-coalesce-max", lab(coalesce_ms=10_000), HOLD),
    case("lab-coalesce-over-max", lab(coalesce_ms=10_000.5), 400),
    case("lab-coalesce-negative", lab(coalesce_ms=-0.1), 400),
    case("lab-detokenizer-naive", lab(detokenizer="naive"), SERVE),
    case("lab-detokenizer-empty", lab(detokenizer=""), 400),
    case("lab-error-mode-fake-done", lab(error_mode="fake-done", error_after_tokens=1), SERVE),
    case("lab-omit-every-header", lab(omit_headers=["content-type", "cache-control",
                                                    "x-accel-buffering"]), SERVE),
    case("lab-omit-header-upper-case", lab(omit_headers=["X-ACCEL-BUFFERING"]), SERVE),
    case("lab-omit-header-number", lab(omit_headers=[1]), 400),
    case("lab-stamp-string", lab(stamp="yes"), 400),
    case("lab-script-empty", lab(script=""), SERVE),
    case("lab-script-unicode", lab(script="e\u0301 \U0001F468\u200d\U0001F469 \u05e9\u05dc\u05d5\u05dd "
                                   "\u65e5\u672c"), SERVE),
    case("lab-script-over-context", lab(script="x" * 300_000), 400),
    case("lab-unknown-field", lab(tokens_per_sec=5), 400),
    case("lab-a-list", body(lab=[1, 2]), 400),
    case("lab-deeply-nested", body(raw='"lab": ' + "[" * 5000 + "]" * 5000), 400),
    # Strings and unicode.
    case("content-lone-surrogate", body(raw='"messages": [{"role": "user", "content": "\\ud800"}]'),
         400),
    case("content-nul", body(messages=[{"role": "user", "content": "a\u0000b"}]), SERVE),
    case("content-emoji-and-rtl", body(messages=[{"role": "user", "content":
                                                  "\U0001F600\u202e\u0644\u0627 \ufeff"}]), SERVE),
    case("content-4-mb", body(messages=[{"role": "user", "content": "x" * 4_000_000}]), 400),
    case("content-9-mb", body(messages=[{"role": "user", "content": "x" * 9_000_000}]), 413),
    case("content-many-parts", body(messages=[{"role": "user", "content":
                                               [{"type": "text", "text": "a "}] * 500}]), SERVE),
    case("messages-ten-thousand", body(messages=[{"role": "user", "content": "x"}] * 10_000), 400),
    case("messages-three-hundred-thousand", body(messages=[{"role": "user"}] * 300_000), 400),
    case("role-huge", body(messages=[{"role": "u" * 100_000, "content": "x"}]), 400),
    case("model-huge", body(model="m" * 100_000), 404),
    case("stop-four-long", body(stop=["\u00e9" * 10_000] * 4), SERVE),
    case("stream-options-wrong-type", body(stream_options={"include_usage": "x"}), 400),
    case("body-not-utf8", b'{"model": "tiny", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
         400),
    case("body-null", b"null", 400),
    case("body-number", b"1e999", 400),
    case("body-duplicate-keys", body(raw='"max_tokens": 2'), SERVE),
    # Content-Type: only application/json (415 keeps web pages from posting cross-site).
    case("content-type-text-plain", body(), 415, content_type="text/plain"),
    case("content-type-form", body(), 415, content_type="application/x-www-form-urlencoded"),
    case("content-type-missing", body(), 415, content_type=None),
    case("content-type-json-like", body(), 415, content_type="application/jsonx"),
    case("content-type-json-charset", body(), SERVE, content_type="application/json; charset=utf-8"),
    case("content-type-json-upper-case", body(), SERVE, content_type="Application/JSON"),
]
