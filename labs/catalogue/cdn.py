"""CDN scenarios (Varnish as the cache): a cached stream replayed to the next user, the waiting
list, and the between-bytes timeout."""
from __future__ import annotations

from labs.catalogue.drivers import staggered
from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload

DOCS = "https://varnish-cache.org/docs/7.1"
BETWEEN_BYTES_S = 2.0  # cdn-between-bytes: the backend's .between_bytes_timeout
SILENCE_S = 4.0
# EventSource-style clients: a GET whose URL carries the request, which a cache can key on.
GET = {"method": "GET"}
NO_CACHE_CONTROL = {"omit_headers": ["cache-control"]}
PREFILL_S = 3.0  # cdn-waiting-list: the server's silence before its headers
SECOND_AFTER_S = 0.5  # the second user asks the same URL this long after the first
# The waiting user's first token is late by at least half a prefill, in token intervals (10/s).
WAITED_INTERVALS = 0.5 * PREFILL_S * Workload().tokens_per_s


SCENARIOS = [
    Scenario(
        name="cdn-cache-replay",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="a second user gets the first user's whole answer at once, and the model never ran",
        path=("varnish",),
        workload=Workload(streams=2, sequential=True, client=GET),
        broken=Variant(lab=NO_CACHE_CONTROL),
        fix=Variant(lab={"omit_headers": []}),
        symptom_checks=(checks.replayed_from_cache(), checks.server_requests(1, at_least=False)),
        cure_checks=(checks.every_stream_live(), checks.server_requests(2, at_least=True)),
        explanation=(
            "A GET stream (an EventSource client) is a cacheable answer to Varnish's built-in VCL "
            "unless the server says otherwise: without `Cache-Control`, Varnish stores it for its "
            "default TTL (120 s) and a second user asking the same URL gets the first user's whole "
            "answer from the cache, in one read, with a Content-Length and an Age header; the model "
            "never ran for them. The server's `Cache-Control: no-cache` makes every request go to "
            "the backend (live); `return (pass)` for `Accept: text/event-stream` in vcl_recv (what "
            "proxies/fixed/varnish.vcl does) fixes it at the cache whatever the server sends."),
        fix_summary="the server sends `Cache-Control: no-cache` (or VCL: return (pass) for event streams)",
        finding=(
            "Measured here and not a failure: Varnish streams a POST (the built-in VCL passes every "
            "method but GET and HEAD, and beresp.do_stream is on by default)."),
        sources=(f"{DOCS}/users-guide/vcl-built-in-code.html", f"{DOCS}/reference/vcl-var.html#beresp-ttl"),
    ),
    Scenario(
        name="cdn-between-bytes",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="long answers end mid-sentence behind the CDN, with a 200 already sent",
        path=("varnish",),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": SILENCE_S}),
        broken=Variant(proxy={"varnish": {"between_bytes_timeout": BETWEEN_BYTES_S}}, lab={"heartbeat_s": 0}),
        fix=Variant(proxy={"varnish": {"between_bytes_timeout": "10s"}}, lab={"heartbeat_s": 0.25}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_after_silence(BETWEEN_BYTES_S, "between_bytes_timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(BETWEEN_BYTES_S, "the broken between_bytes_timeout")),
        explanation=(
            "Varnish bounds each silence of the backend by between_bytes_timeout (60 s by default): a "
            "longer pause mid-stream ends the fetch (`FetchError ... read err` in varnishlog) and the "
            "client, which already has its 200, sees the stream stop without [DONE]. Before the "
            "headers first_byte_timeout applies and the answer is a 503. Set both above the longest "
            "silence and send heartbeats more often than that."),
        fix_summary=".between_bytes_timeout above the longest silence, plus `: ping` heartbeats",
        scaled=(Scaled("between_bytes_timeout", f"{BETWEEN_BYTES_S:g}s", "60s"),
                Scaled("silence mid-stream", f"{SILENCE_S:g}s", "minutes"),
                Scaled("heartbeat interval", "0.25s", "10s")),
        sources=(f"{DOCS}/reference/vcl.html#backend-definition",),
    ),
    Scenario(
        name="cdn-waiting-list",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="two users asking the same thing: the second waits for the first's prefill, then its own",
        path=("varnish",),
        workload=Workload(lab={"headers_delay_s": PREFILL_S}, client=GET,
                          driver=staggered(2, SECOND_AFTER_S)),
        broken=Variant(),
        fix=Variant(proxy={"varnish": {"pass_event_streams": True}}),
        symptom_checks=(checks.sent_together_at_least(2, "two users on one URL"),
                        checks.ttft_max_at_least(WAITED_INTERVALS)),
        cure_checks=(checks.sent_together_at_least(2, "two users on one URL"),
                     checks.ttft_p99_within(checks.STREAM_SLACK_INTERVALS), checks.complete_with_done()),
        explanation=(
            "Varnish collapses requests for the same object: while the first user's fetch has no "
            "headers yet (the model's prefill), a second request for the same URL waits on the "
            "object's waiting list. When the headers come with `Cache-Control: no-cache` (the "
            "server's default), the object is not cacheable and the second request only then goes "
            "to the backend itself: its TTFT is the first user's prefill plus its own. The server's "
            "headers cannot fix this, the cache must not look event streams up at all: "
            "`return (pass)` in vcl_recv for `Accept: text/event-stream`."),
        fix_summary="VCL: if (req.http.Accept ~ \"text/event-stream\") { return (pass); }",
        finding=(
            "Measured here: with beresp.do_stream = false the second user waits for the whole first "
            "answer (TTFT = the first user's E2E), and a POST is then fully buffered too."),
        scaled=(Scaled("prefill (headers delay)", f"{PREFILL_S:g}s", "seconds under load"),
                Scaled("second user", f"{SECOND_AFTER_S:g}s later", "any overlap")),
        sources=(f"{DOCS}/users-guide/vcl-built-in-code.html",
                 f"{DOCS}/reference/vcl.html#vcl-recv"),
    ),
]
