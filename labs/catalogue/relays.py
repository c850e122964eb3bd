"""Relay- and gateway-layer scenarios of the streams coding agents use: a hop between a proxy and
the model that reads, filters or translates the events on the way (the Starlette relay's modes,
proxies/apps/starlette/modes.py; LiteLLM)."""
from __future__ import annotations

from labs.catalogue.nginx import DOCS as NGINX_DOCS
from labs.catalogue.common import NGINX_READ, pings_kept_through, pings_lost_to
from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload
from proxies.apps.litellm.kind import LITELLM_KEY
from proxies.apps.litellm.settings import MESSAGES_BRIDGE
from proxies.apps.starlette.modes import (AI_GATEWAY_PING, CLAUDE_CODE_PROXY, HTTPX_RAW, LITELLM_EVENT_LINES,
                                          UNITY_GATEWAY)
from server.apis.table import CHAT, MESSAGES

RELAY_IDLE_TIMEOUT_S = 2.0  # relay-iter-raw: nginx's proxy_read_timeout in front of the relay
THINK_S = 4.0  # the model's silence before its first token (a long reasoning step)
SERVER_PING_S = 0.25  # the server's `: ping` heartbeat during it
GATEWAY_IDLE_TIMEOUT_S = 2.0  # gateway-drops-ping: nginx's proxy_read_timeout in front of LiteLLM
# LiteLLM's own keep-alive in the fix: once a second is its floor (litellm-heartbeats measured it).
GATEWAY_PING_S = 1.0
LITELLM_KEEPALIVE = "https://docs.litellm.ai/docs/proxy/config_settings"
# What a Messages client sends LiteLLM: its key as Anthropic's SDK sends one.
MESSAGES_CLIENT = {"library": "anthropic", "headers": {"x-api-key": LITELLM_KEY}}
SDK_SKIPS_NAMELESS = "https://github.com/anthropics/anthropic-sdk-python/blob/main/src/anthropic/_streaming.py"
MESSAGES_EVENTS = "https://docs.anthropic.com/en/api/messages-streaming"

def iter_raw_relay(name: str, api: str, symptom: str, finding: str) -> Scenario:
    """The iter_raw(8192) relay behind nginx's read timeout, on one protocol: the lesson is the
    same on every protocol whose heartbeats are small (chat's `: ping`, Messages' `event: ping`)."""
    return Scenario(
        name=name,
        layer="gateway",
        kind="idle-timeout",
        symptom=symptom,
        path=("nginx", "starlette"),
        base="fixed",
        workload=Workload(lab={"first_token_delay_s": THINK_S, "heartbeat_s": SERVER_PING_S}, api=api),
        broken=Variant(proxy={"nginx": {"proxy_read_timeout": RELAY_IDLE_TIMEOUT_S},
                              "starlette": {"mode": "iter-raw"}}),
        fix=Variant(proxy={"starlette": {"mode": "lines"}}),
        symptom_checks=(checks.outcome_is("truncated"), *pings_lost_to(RELAY_IDLE_TIMEOUT_S, NGINX_READ)),
        cure_checks=pings_kept_through(RELAY_IDLE_TIMEOUT_S, NGINX_READ),
        server_metrics=("streamlab_heartbeats_total",),
        explanation=(
            "A relay that reads its upstream with httpx's `iter_raw(8192)` (or `aiter_raw`, or "
            "`iter_bytes` with a chunk size) gets only whole chunks of that many bytes: httpx "
            "buffers smaller reads until the chunk is full or the body ends. A heartbeat is 8 to "
            "40 bytes, an event a few hundred: during a think, the pings the server sends every "
            "few seconds pile up inside the relay, and every hop in front of it sees silence. An "
            "idle timeout there (a proxy's read timeout, a load balancer's idle timeout, the "
            "client's own) cuts the stream before the first token. Read without a chunk size: "
            "`aiter_raw()` / `aiter_bytes()` hand over what each read returned, `aiter_lines()` "
            "each line as its newline arrives."),
        fix_summary="forward as you read: `async for line in upstream.aiter_lines()` "
                    "(or `aiter_raw()` without a chunk size)",
        finding=finding,
        scaled=(Scaled("nginx proxy_read_timeout", f"{RELAY_IDLE_TIMEOUT_S:g}s", "60s (nginx's default)"),
                Scaled("think before the first token", f"{THINK_S:g}s", "284 s in the report"),
                Scaled("server heartbeat", f"{SERVER_PING_S:g}s", "a ping every few seconds")),
        sources=(UNITY_GATEWAY, HTTPX_RAW, f"{NGINX_DOCS}#proxy_read_timeout"),
    )


SCENARIOS = [
    iter_raw_relay(
        "relay-iter-raw", CHAT.name,
        "behind the Python gateway the model's long thinks are cut, though the server pings every few "
        "seconds; the client saw 0 bytes",
        (
            "Measured here (`python -m labs run relay-iter-raw`: Starlette 1.10.0, uvicorn 0.55.0, "
            "httpx 0.29.0, nginx 1.30.6, a 4 s think with a ping every 0.25 s): through "
            "`aiter_raw(8192)` nginx sent 0 body bytes and cut the stream 2.00 s in (\"upstream timed "
            "out\") while the server had sent 7 pings; forwarding lines, all 15 pings arrived, TTFT "
            "4,012 ms, complete. The relay alone (no nginx, a short answer after the same think): "
            "the whole 2,989-byte answer, under one chunk, reached the client in one piece at the "
            "end (first byte 4.80 s = E2E); `aiter_raw(1024)` handed over its first chunk at 4.20 s; "
            "lines, the role chunk at 19 ms and each ping as sent.")),
    iter_raw_relay(
        "relay-messages-iter-raw", MESSAGES.name,
        "behind the Python gateway, Anthropic Messages streams (Claude Code's) lose long thinks to an "
        "idle timeout, though the model sends `event: ping` every few seconds",
        "Measured here (`python -m labs run relay-messages-iter-raw`: the lab's client on "
        "/v1/messages, Starlette 1.10.0, httpx 0.29.0, nginx 1.30.6, a 4 s think with an `event: "
        "ping` every 0.25 s): through `aiter_raw(8192)` nginx sent 0 body bytes, not even "
        "`message_start`, and cut the stream 2.01 s in while the server had sent 7 pings; "
        "forwarding lines, 16 pings arrived, TTFT 4,010 ms, complete (3,998 body bytes). The "
        "Anthropic SDK through the relay alone: `aiter_raw(8192)` handed it the whole 2,267-byte "
        "stream, `message_start` and 16 pings included, in one read at 4.83 s; lines, 90 reads, "
        "TTFT 4.01 s."),
    Scenario(
        name="gateway-drops-ping",
        layer="gateway",
        kind="idle-timeout",
        symptom="through the LiteLLM gateway, Anthropic-API clients get a 504 whenever the model "
                "thinks long, though the model server pings while it thinks",
        path=("nginx", "litellm"),
        base="fixed",
        workload=Workload(lab={"first_token_delay_s": THINK_S, "heartbeat_s": SERVER_PING_S},
                          client=MESSAGES_CLIENT, api=MESSAGES.name),
        # LiteLLM's /v1/messages bridge, translating to the model server's chat route.
        broken=Variant(proxy={"nginx": {"proxy_read_timeout": GATEWAY_IDLE_TIMEOUT_S},
                              "litellm": {"messages_upstream": "chat"}}),
        fix=Variant(proxy={"litellm": {"keepalive_ping_s": GATEWAY_PING_S}}),
        symptom_checks=(checks.status_is(504), *pings_lost_to(GATEWAY_IDLE_TIMEOUT_S, NGINX_READ)),
        cure_checks=pings_kept_through(GATEWAY_IDLE_TIMEOUT_S, NGINX_READ),
        server_metrics=("streamlab_heartbeats_total",),
        explanation=(
            "A gateway that translates one protocol into another (LiteLLM's /v1/messages in front "
            "of an OpenAI-compatible model server, Envoy AI Gateway between Anthropic and OpenAI) "
            "parses the upstream's events and writes its own: the `: ping` comments the model "
            "server sends while it thinks are not events, so none comes out. LiteLLM's bridge "
            "also sends no response headers until the first translated event: through a long "
            "think every hop in front of it sees a request without an answer, and an idle or "
            "header timeout there (nginx's `proxy_read_timeout`, a load balancer's idle timeout) "
            "answers 504 before the first token. Have the gateway send its own keep-alives: "
            "LiteLLM's `sse_keepalive_ping_interval_seconds` applies to its Messages route too "
            "(the headers go with the first ping)."),
        fix_summary=f"litellm_settings: {{sse_keepalive_ping_interval_seconds: {GATEWAY_PING_S:g}}}",
        finding=(
            "Measured here (`python -m labs run gateway-drops-ping`: LiteLLM proxy 1.108.7, nginx "
            "1.30.6, the Anthropic SDK 2.17 as the client, a 4 s think with a ping every 0.25 s): "
            "nginx answered 504 at 2,056 ms (\"upstream timed out while reading response header\") "
            "while the server had sent 7 pings; with LiteLLM's keep-alive at 1 s the headers and "
            "the first `: ping` came at 1,021 ms, 4 pings in all, TTFT 4,043 ms, complete. Without "
            "nginx, the bridge's headers came with the first token (TTFB = TTFT, 3.05 s after a "
            "3 s think). LiteLLM 1.108.7 sends /v1/messages for an `openai/` model to the "
            "upstream's /v1/responses by default (`_RESPONSES_API_PROVIDERS`): that bridge streamed "
            "(27 text deltas) but left out the body's unknown fields, so the `lab` object (the "
            "think) never reached the server; `use_chat_completions_url_for_anthropic_messages` "
            "(the hop's `messages_upstream: chat`) makes it translate to chat/completions, which "
            "keeps them: the route measured here. The first "
            "/v1/messages after a start was 3.4 s slower than the next: the hop warms it."),
        scaled=(Scaled("nginx proxy_read_timeout", f"{GATEWAY_IDLE_TIMEOUT_S:g}s", "60s (nginx's default)"),
                Scaled("think before the first token", f"{THINK_S:g}s", "minutes of extended thinking")),
        sources=(AI_GATEWAY_PING, MESSAGES_BRIDGE, LITELLM_KEEPALIVE, f"{NGINX_DOCS}#proxy_read_timeout"),
    ),
    Scenario(
        name="proxy-strips-event-lines",
        layer="gateway",
        symptom="through the logging proxy the Python app's streamed answers are empty with a 200, "
                "and Claude Code sends every prompt twice",
        # A relay that forwards only `data:` lines, in front of the server's Messages route.
        path=("starlette",),
        workload=Workload(client={"library": "anthropic"}, api=MESSAGES.name),
        broken=Variant(proxy={"starlette": {"mode": "data-only"}}),
        fix=Variant(proxy={"starlette": {"mode": "lines"}}),
        symptom_checks=(checks.status_is(200), checks.content_events_at_most(0),
                        checks.server_metric_at_least("streamlab_tokens_generated_total", 10,
                                                      "the server generated the answer"),
                        checks.server_requests(1, at_least=False)),
        cure_checks=(checks.complete_with_done(), checks.text_is_script(),
                     checks.server_requests(1, at_least=False)),
        server_metrics=("streamlab_tokens_generated_total", 'streamlab_requests_total{status="200"}'),
        explanation=(
            "Anthropic Messages names every event on its own `event:` line (`message_start`, "
            "`content_block_delta`, ..., `message_stop`), and the clients dispatch on that name: "
            "a hop that forwards only the `data:` lines (a logging proxy that re-frames what it "
            "parsed, a gateway that writes OpenAI-style frames) delivers every byte of JSON and "
            "no event a client will take. The Anthropic Python SDK skips every event without a "
            "name, raises nothing and ends on a 200 with an empty answer. Claude Code finds no "
            "`message_start` (\"Stream completed without receiving message_start event\", in the "
            "reports) and sends the prompt again without streaming: the user gets the answer, "
            "late, and every prompt costs the model twice. Forward the event lines with their data: relay each line as it comes (or the "
            "raw bytes), never a re-framing of `data:` payloads alone."),
        fix_summary="relay every line (`async for line in upstream.aiter_lines(): yield line + \"\\n\"`), "
                    "`event:` lines included",
        finding=(
            "Measured here (`python -m labs run proxy-strips-event-lines`: the Starlette relay's "
            "data-only mode in front of the lab's /v1/messages, the Anthropic SDK 2.17 as the "
            "client, 20 tokens at 10 tok/s): a 200 and 2,461 body bytes (the server generated all "
            "21 tokens, one request) and 0 events: the SDK skipped every nameless one and raised "
            "nothing, so the app's answer was empty at 2.01 s. Relaying every line: 3,155 bytes, "
            "21 text deltas, TTFT 17 ms, the exact text. The Python SDK does not retry. Claude "
            "Code 2.1.332 through the same relays (tests/labs/test_relay_agents.py; its own "
            "scenario, claude-code-event-lines): data-only, a "
            "streamed request and then the same prompt unstreamed, 2 answers for 1 prompt (its "
            "answer right, from the second); every line, 1 streamed request."),
        sources=(CLAUDE_CODE_PROXY, LITELLM_EVENT_LINES, MESSAGES_EVENTS, SDK_SKIPS_NAMELESS),
    ),
]
