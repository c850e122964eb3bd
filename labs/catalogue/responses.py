"""OpenAI Responses API scenarios: a failure event that does not end the stream, a resume through a
proxy that caches it, a gateway that re-frames a non-streamed answer.

The Responses stream has no `[DONE]`: it ends on its terminal event (`response.completed`, or
`response.failed` / `error`), and a stored response resumes with
`GET /v1/responses/{id}?stream=true&starting_after=N` (docs/server.md "The other protocols").
"""
from __future__ import annotations

from typing import Any

from labs.catalogue.drivers import cut_then_resume
from proxies.apps.litellm.kind import LITELLM_KEY
from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload
from server.apis.table import RESPONSES

STREAMING = "https://platform.openai.com/docs/api-reference/responses-streaming"
RETRIEVE = "https://platform.openai.com/docs/api-reference/responses/get"
VARNISH = "https://varnish-cache.org/docs/7.1"
# The server's count of Responses requests, streamed or not: who asked, and how.
RESPONSES_STREAMED = 'streamlab_api_requests_total{api="responses",stream="true"}'
RESPONSES_WHOLE = 'streamlab_api_requests_total{api="responses",stream="false"}'

# ---- responses-terminal-event ----------------------------------------------------------------
FAILED_AFTER_TOKENS = 5
# The client's idle bound: Codex's `stream_idle_timeout_ms` (300,000 ms by default), shrunk.
IDLE_BOUND_S = 2.0

# ---- responses-resume --------------------------------------------------------------------------
CUT_AFTER_TOKENS = 6  # the first stream is cut (the server drops the connection) after these
RESUMES = 2  # the same resume asked twice: a second client (or a retry after another cut)
RESUME_WORKLOAD = Workload(api=RESPONSES.name, lab={"abort_after_tokens": CUT_AFTER_TOKENS},
                           driver=cut_then_resume(RESUMES))
# Both resumes continue the cut stream; the second one is the cache's copy (symptom) or live (cure).
RESUME_SYMPTOM = (checks.outcome_is("truncated", share=1 / (1 + RESUMES)), checks.resume_joins(1),
                  checks.replayed_from_cache(paced_index=1),
                  checks.server_metric_at_most(RESPONSES_STREAMED, RESUMES,
                                               "the second resume never reached the server"))
RESUME_CURE = (checks.resume_joins(1), checks.resume_joins(RESUMES), checks.every_stream_live(start=1),
               checks.server_metric_at_least(RESPONSES_STREAMED, 1 + RESUMES, "every resume reached the server"))
RESUME_WHY = (
    "A Responses stream that breaks (a proxy's timeout, a deploy) is resumed with a GET: "
    "`/v1/responses/{id}?stream=true&starting_after=N` sends the events after sequence number N. A "
    "GET is what a cache stores: a second resume of the same response (another tab, a retry after "
    "a second cut) is answered from the cache, whole in one read, and the server never hears it; "
    "a response still running, or a sampled one, is then a stale copy. ")
# nginx-cache-resume: the server's headers that would keep the answer out of nginx's cache.
NGINX_CACHE_BLOCKERS = ["cache-control", "x-accel-buffering"]


def resumed_through_cache(*, why: str, **declared: Any) -> Scenario:
    """A resume scenario: the shared workload, checks and explanation, then the cache's own `why`
    and the rest of the declaration (name, symptom, path, variants, fix, finding, sources)."""
    return Scenario(layer="proxy", workload=RESUME_WORKLOAD, symptom_checks=RESUME_SYMPTOM,
                    cure_checks=RESUME_CURE, explanation=RESUME_WHY + why, **declared)

# ---- responses-pseudo-stream ------------------------------------------------------------------
# LiteLLM's own overhead put the first delta 0.45-0.85 s after the request on this 2-core machine
# (direct: 0.18 s): at 2 tokens/s the streamed slack (3 intervals, 1.5 s) covers it, and the held
# answer still ends 5 s after its first token was due.
GATEWAY_SCRIPT = "Every token should reach the reader at once."
GATEWAY_TOKENS_PER_S = 2.0
SERVED_MODEL = "lab-model"  # the name the server serves, and LiteLLM's named entry in the fix
# LiteLLM's Responses route drops the body's `lab` object; its `extra_body` reaches the upstream.
GATEWAY_LAB = {"script": GATEWAY_SCRIPT, "tokens_per_s": GATEWAY_TOKENS_PER_S}

SCENARIOS = [
    Scenario(
        name="responses-terminal-event",
        layer="server",
        symptom="the agent hangs for minutes after a failed turn, then says only 'idle timeout'",
        path=(),
        workload=Workload(api=RESPONSES.name, lab={"error_after_tokens": FAILED_AFTER_TOKENS},
                          client={"read_timeout_s": IDLE_BOUND_S}),
        broken=Variant(lab={"error_mode": "hold-open"}),
        fix=Variant(lab={"error_mode": "inband"}),
        symptom_checks=(checks.outcome_is("error-in-band"), checks.failure_on_time(FAILED_AFTER_TOKENS),
                        # The whole bound, less one token interval of timer slack.
                        checks.open_after_failure(IDLE_BOUND_S - Workload().interval_s,
                                                  "until the client's idle bound", at_least=True)),
        cure_checks=(checks.outcome_is("error-in-band"), checks.failure_on_time(FAILED_AFTER_TOKENS),
                     checks.open_after_failure(checks.STREAM_SLACK_INTERVALS * Workload().interval_s,
                                               "closed with the failure event", at_least=False)),
        explanation=(
            "A Responses stream has no `[DONE]`: it ends on its terminal event, `response.completed`, "
            "or `response.failed` / `error` for a failure after the 200. A server (or a relay) that "
            "sends `response.failed` and then leaves the connection open makes every reader that waits "
            "for the end of the body sit until its own idle timeout; the agent then reports the idle "
            "timeout, and the real error, already on the wire, is lost (openai/codex#43140). The "
            "measuring client reports the failure event when it arrives, and the connection stays "
            "open until the client's bound. Close the stream right after the failure event, as "
            "OpenAI does."),
        fix_summary="end the body right after `response.failed` (error_mode: inband)",
        finding=(
            "Measured here (`python -m labs run responses-terminal-event`, server alone, 10 tok/s, "
            "the failure after 5 tokens, idle bound 2 s): the failure event arrived at 415 ms "
            "(hold-open) and 434 ms (inband); the connection then stayed open 2,002 ms, to the "
            "client's bound, against 1 ms. A reader with chat's habit (waiting for `data: [DONE]`, "
            "reading `delta.content`) finds no token and no end on a Responses stream: the measuring "
            "client with `api=chat` reported a whole one `truncated` (0 tokens of its 29 events) and "
            "a failed one held open as a read timeout, the failure unseen "
            "(tests/labs/test_responses_terminal.py)."),
        scaled=(Scaled("client idle timeout", f"{IDLE_BOUND_S:g}s", "300s (Codex stream_idle_timeout_ms)"),),
        sources=(STREAMING, "https://github.com/openai/codex/issues/43140"),
    ),
    resumed_through_cache(
        name="responses-resume",
        symptom="a second resume of a dropped Responses stream comes from the CDN's cache, and the server never hears it",
        path=("varnish",),
        broken=Variant(lab={"omit_headers": ["cache-control"]}),
        # The API's requests, not `Accept: text/event-stream`: the openai SDK resumes (and polls)
        # with `Accept: application/json`, which a pass keyed on Accept never matches
        # (tests/reliability/test_proxies_protocols.py; proxies/fixed/varnish.vcl does the same).
        fix=Variant(proxy={"varnish": {"pass_api_requests": True}}),
        why=(
            "Varnish's built-in VCL caches a GET when the server sends no Cache-Control. Pass the "
            "API's requests at the cache (`return (pass)` under /v1/; a pass keyed on "
            "`Accept: text/event-stream` misses the openai SDK, which asks for application/json), "
            "or send `Cache-Control: no-store` on the resume."),
        fix_summary='VCL: if (req.url ~ "^/v1/") { return (pass); }',
        finding=(
            "Measured here (`python -m labs run responses-resume`; the other proxies by the same "
            "workload on their defaults): cut after 6 tokens, both resumes joined the cut text into "
            "the whole script through every proxy. Through Varnish without Cache-Control the second "
            "resume came from the cache in one read (TTFT 0 ms) and the server counted 2 streamed "
            "requests for 3; with the server's `Cache-Control: no-cache`, or a VCL pass, all 3 "
            "reached it. nginx, HAProxy and Caddy on their defaults passed every resume to the "
            "server, live (nginx and Caddy one read per event, HAProxy 15 events in 7 reads, its "
            "usual grouping without http-no-delay): nginx caches nothing without `proxy_cache`, and "
            "the server's `X-Accel-Buffering: no` turns its buffering off. A resume's first delta "
            "comes about N token intervals late (0.5-0.8 s here): the lab's server regenerates the "
            "answer and skips the events up to N (docs/server.md)."),
        sources=(RETRIEVE, STREAMING, f"{VARNISH}/users-guide/vcl-built-in-code.html"),
    ),
    resumed_through_cache(
        name="nginx-cache-resume",
        symptom="behind nginx with proxy_cache, a second resume of a dropped Responses stream is a cached copy",
        path=("nginx",),
        broken=Variant(proxy={"nginx": {"proxy_cache_valid": "1m"}}, lab={"omit_headers": NGINX_CACHE_BLOCKERS}),
        fix=Variant(proxy={"nginx": {"proxy_cache_valid": None}}),
        why=(
            "nginx with `proxy_cache` on the route stores a 200 GET for `proxy_cache_valid` unless "
            "the upstream's headers keep it out: `Cache-Control: no-cache` (or private, no-store) "
            "does, and so does `X-Accel-Buffering: no`, since nginx caches only what it buffers. "
            "A server or a relay that sends neither has its resumes cached. Leave the Responses "
            "route out of the cache (no `proxy_cache` in its location, or "
            "`proxy_no_cache`/`proxy_cache_bypass` for it)."),
        fix_summary="no `proxy_cache` on the Responses route (its resume GETs are streams for one user)",
        finding=(
            "Measured here (the same workload, nginx with `proxy_cache_valid 200 1m`): with both "
            "headers omitted the first resume streamed live (16 reads for 15 events: nginx hands a "
            "chunked reply on chunk by chunk while it stores it) and the second came from the store "
            "in one read, the server counting 2 streamed requests for 3; with only Cache-Control "
            "omitted (`X-Accel-Buffering: no` still sent) and with the server's defaults, all 3 "
            "reached the server."),
        sources=(RETRIEVE, "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_cache",
                 "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_buffering"),
    ),
    Scenario(
        name="responses-pseudo-stream",
        layer="gateway",
        symptom="behind the AI gateway the Responses stream shows nothing, then the whole answer at once",
        path=("litellm",),
        workload=Workload(api=RESPONSES.name, script=GATEWAY_SCRIPT, tokens_per_s=GATEWAY_TOKENS_PER_S,
                          request={"extra_body": {"lab": GATEWAY_LAB}},
                          client={"headers": {"Authorization": f"Bearer {LITELLM_KEY}"}}),
        broken=Variant(server_args=("--served-model-name", SERVED_MODEL)),
        fix=Variant(proxy={"litellm": {"named_model": SERVED_MODEL}}),
        symptom_checks=(checks.held_to_end(), checks.outcome_is("complete"),
                        checks.server_metric_at_least(RESPONSES_WHOLE, 1, "LiteLLM asked without streaming"),
                        checks.server_metric_at_most(RESPONSES_STREAMED, 0, "and never with it")),
        cure_checks=(checks.streamed(), checks.outcome_is("complete"), checks.text_is_script(),
                     checks.server_metric_at_least(RESPONSES_STREAMED, 1, "LiteLLM asked with streaming"),
                     checks.server_metric_at_most(RESPONSES_WHOLE, 0, "and never without it")),
        server_metrics=(RESPONSES_STREAMED, RESPONSES_WHOLE),
        explanation=(
            "A gateway that calls its upstream without streaming and then re-frames the whole answer "
            "as SSE sends a well-formed Responses stream whose first delta comes with the last: TTFT "
            "= E2E (ZenMux/zenmux-doc#274: first byte at 42.1 s instead of 1.9 s). LiteLLM does this "
            "on its `/v1/responses` route for every model its model map does not know: "
            "`should_fake_stream` asks `supports_native_streaming`, whose lookup of an unknown model "
            "fails and answers False, so a self-hosted model reached through the wildcard `*` entry "
            "is called with `stream: false` and its answer re-chunked. A model_list entry of its own "
            "for the model name is a known model: the upstream is called with streaming and the "
            "deltas pass as they come."),
        fix_summary="model_list: an entry of its own for the model (`model_name: lab-model`), not the wildcard alone",
        finding=(
            "Measured here (`python -m labs run responses-pseudo-stream`, LiteLLM 1.108.7, 2 tok/s): "
            "through the wildcard entry the server counted one non-streamed request and the client "
            "got its first delta at 5,950 ms, E2E 5,984 ms, 9 deltas in one read (LiteLLM re-chunks "
            "the text); with the named entry one streamed request, TTFT 481 ms, 12 deltas in 12 "
            "reads. `model_info: {supports_native_streaming: true}` on the wildcard entry did not "
            "help (still `stream: false` upstream); a named entry without it did. LiteLLM's "
            "Responses route also drops the body's `lab` object (it passes `extra_body`), so this "
            "workload sends its pacing there."),
        sources=("https://github.com/ZenMux/zenmux-doc/issues/274",
                 "https://docs.litellm.ai/docs/response_api", STREAMING),
    ),
]
