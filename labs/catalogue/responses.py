"""OpenAI Responses API scenarios: a failure event that does not end the stream, a resume through a
proxy that caches it, a gateway that re-frames a non-streamed answer.

The Responses stream has no `[DONE]`: it ends on its terminal event (`response.completed`, or
`response.failed` / `error`), and a stored response resumes with
`GET /v1/responses/{id}?stream=true&starting_after=N` (docs/server.md "The other protocols").
"""
from __future__ import annotations

from labs.catalogue.drivers import cut_then_resume
from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload
from server.apis.table import RESPONSES

STREAMING = "https://platform.openai.com/docs/api-reference/responses-streaming"
RETRIEVE = "https://platform.openai.com/docs/api-reference/responses/get"
VARNISH = "https://varnish-cache.org/docs/7.1"

# ---- responses-terminal-event ----------------------------------------------------------------
FAILED_AFTER_TOKENS = 5
# The client's idle bound: Codex's `stream_idle_timeout_ms` (300,000 ms by default), shrunk.
IDLE_BOUND_S = 2.0

# ---- responses-resume --------------------------------------------------------------------------
CUT_AFTER_TOKENS = 6  # the first stream is cut (the server drops the connection) after these
RESUMES = 2  # the same resume asked twice: a second client (or a retry after another cut)

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
            "Measured here (server alone, 10 tok/s, the failure after 5 tokens, idle bound 3 s): the "
            "failure event arrived at 0.41 s either way; with hold-open the connection ended at "
            "3.41 s (the client's read timeout), with inband at 0.41 s. A reader with chat's habit "
            "(waiting for `data: [DONE]`, reading `delta.content`) on a Responses stream finds no "
            "token and no end: the measuring client with `api=chat` on a whole Responses stream "
            "reported `truncated`, 0 tokens of 29 events, at the close (2.02 s)."),
        scaled=(Scaled("client idle timeout", f"{IDLE_BOUND_S:g}s", "300s (Codex stream_idle_timeout_ms)"),),
        sources=(STREAMING, "https://github.com/openai/codex/issues/43140"),
    ),
    Scenario(
        name="responses-resume",
        layer="proxy",
        symptom="after a dropped connection the agent resumes the answer, and gets it whole and late, or a stale copy",
        path=("varnish",),
        workload=Workload(api=RESPONSES.name, lab={"abort_after_tokens": CUT_AFTER_TOKENS},
                          driver=cut_then_resume(RESUMES)),
        broken=Variant(lab={"omit_headers": ["cache-control"]}),
        fix=Variant(proxy={"varnish": {"pass_event_streams": True}}),
        symptom_checks=(checks.outcome_is("truncated", share=1 / (1 + RESUMES)),
                        checks.resume_joins(1), checks.replayed_from_cache(paced_index=1),
                        checks.server_metric_at_most('streamlab_api_requests_total{api="responses",stream="true"}',
                                                     RESUMES, "the second resume never reached the server")),
        cure_checks=(checks.resume_joins(1), checks.resume_joins(RESUMES), checks.every_stream_live(start=1),
                     checks.server_metric_at_least('streamlab_api_requests_total{api="responses",stream="true"}',
                                                   1 + RESUMES, "every resume reached the server")),
        explanation=(
            "A Responses stream that breaks (a proxy's timeout, a deploy) is resumed with a GET: "
            "`/v1/responses/{id}?stream=true&starting_after=N` sends the events after sequence "
            "number N. A GET is what a cache stores: Varnish's built-in VCL caches it when the "
            "server sends no Cache-Control, so a second resume of the same response (another tab, a "
            "retry after a second cut) is answered from the cache, whole in one read, and the "
            "server never hears it. Pass event streams at the cache (`return (pass)` for "
            "`Accept: text/event-stream`), or send `Cache-Control: no-store` on the resume."),
        fix_summary='VCL: if (req.http.Accept ~ "text/event-stream") { return (pass); }',
        sources=(RETRIEVE, STREAMING, f"{VARNISH}/users-guide/vcl-built-in-code.html"),
    ),
]
