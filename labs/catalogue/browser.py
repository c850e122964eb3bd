"""Browser-layer scenarios: every hop and the server stream, and the browser's own APIs spoil it.

Their client is Chromium (labs/scenario/chromium.py) running the view's own client, static/client.js,
so each guard measures what a page would see.
"""
from __future__ import annotations

from labs.client.durations import milliseconds
from labs.scenario import checks
from labs.catalogue.common import MANY_STREAMS_SERVER
from labs.scenario.checks.base import STREAM_SLACK_INTERVALS
from labs.scenario.model import Check, Run, Scaled, Scenario, Variant, Workload
from labs.scenario.chromium import chromium_driver

ENCODING_API = "https://encoding.spec.whatwg.org/#dom-textdecoder-decode"
SSE_SPEC = "https://html.spec.whatwg.org/multipage/server-sent-events.html"
# Kanji, a character outside the BMP, emoji with a skin tone and a ZWJ sequence: three- and
# four-byte UTF-8 characters, each split across two network chunks by the server here.
MULTIBYTE_SCRIPT = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る"
RECONNECT_SCRIPT = "Every token should reach the reader the moment the model makes it."
# Repeated at the start of a stream that began again from scratch.
RECONNECT_START = RECONNECT_SCRIPT[:11]
# A browser opens at most this many HTTP/1.1 connections to one origin (Chromium, Firefox).
HTTP1_CONNECTIONS_PER_ORIGIN = 6


def split_across_reads() -> Check:
    """The server really split characters across network chunks (the cure cannot pass vacuously)."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        splits = getattr(result, "split_reads", 0)
        return f"{splits} of {result.reads} chunks ended inside a character", splits >= 1
    return Check("characters arrive split across two network chunks (>= 1 chunk ends mid-character)",
                 measure)


def reconnected(at_least: int = 2) -> Check:
    """The stream dropped and EventSource opened it again (the drop under test happened)."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.first
        connections = getattr(result, "connections", 0)
        ids = getattr(result, "last_event_ids", [])
        return f"{connections} connections, Last-Event-ID at each: {ids}", connections >= at_least
    return Check(f"EventSource reconnected after the drop (>= {at_least} connections)", measure)


def start_repeated() -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        text = run.first.text
        seen = text.count(RECONNECT_START)
        return f"{seen} times {RECONNECT_START!r} in {text!r}", seen >= 2
    return Check("the answer starts over after the reconnection: tokens arrive twice", measure)


def resumed_with_last_event_id() -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        ids = getattr(run.first, "last_event_ids", [])
        return f"Last-Event-ID at each connection: {ids}", len(ids) >= 2 and all(ids[1:])
    return Check("each reconnection carried Last-Event-ID", measure)


def protocol_is(protocol: str) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sorted({str(r.http_version) for r in run.results})
        return f"protocols {', '.join(seen)} over {len(run.results)} streams", seen == [protocol]
    return Check(f"every stream went over {protocol} (the browser's Resource Timing)", measure)


def all_started_together() -> Check:
    """The page asked for every stream at once: queueing, if any, is the browser's own."""
    def measure(run: Run) -> tuple[str, bool]:
        starts = [r.start_s for r in run.results]
        spread = max(starts) - min(starts) if starts else None
        limit = run.workload.interval_s
        return f"requests sent within {milliseconds(spread)} (<= {milliseconds(limit)})", (
            len(starts) == run.workload.streams and spread is not None and spread <= limit)
    return Check("all streams were requested at once by the page", measure)


SCENARIOS = [
    Scenario(
        name="browser-textdecoder",
        layer="client",
        symptom="Japanese and emoji show up as � in the chat window, but the API's text is fine",
        path=(),
        workload=Workload(script=MULTIBYTE_SCRIPT, tokens_per_s=10.0, lab={"split_utf8_ms": 30},
                          driver=chromium_driver()),
        broken=Variant(client={"decoder": "naive"}),
        fix=Variant(client={"decoder": "stream"}),
        symptom_checks=(checks.replacement_chars_at_least(1), split_across_reads()),
        cure_checks=(checks.text_is_script(), split_across_reads(), checks.complete_with_done()),
        explanation=(
            "A network chunk ends wherever the bytes happened to be cut, not at a character boundary: "
            "here the server writes each multi-byte character in two writes, as a hop that re-chunks "
            "a stream does. `new TextDecoder().decode(chunk)` treats every chunk as a whole text, so "
            "the two halves of a character each become U+FFFD. `decoder.decode(chunk, {stream: true})` "
            "keeps an incomplete character's bytes until the next chunk completes it (and a final "
            "`decoder.decode()` flushes the end). `response.text()`, EventSource and "
            "`TextDecoderStream` decode in streaming mode already; hand-written readers are where "
            "this bites."),
        fix_summary="decoder.decode(value, {stream: true}) for each chunk (or pipe through TextDecoderStream)",
        finding=(
            "Measured here in Chromium: every chunk that ended mid-character produced U+FFFD with the "
            "naive decode, although the server's own text (and the lab's client) had none; the same "
            "chunks through the streaming decode gave the script exactly."),
        sources=(ENCODING_API, "https://developer.mozilla.org/en-US/docs/Web/API/TextDecoder/decode"),
    ),
    Scenario(
        name="browser-eventsource-reconnect",
        layer="client",
        symptom="after a network blip the answer repeats itself (or has a hole) in the chat window",
        path=(),
        workload=Workload(script=RECONNECT_SCRIPT, tokens_per_s=20.0, lab={"abort_after_tokens": 5},
                          client={"api": "eventsource", "max_connections": 3, "total_timeout_s": 30},
                          driver=chromium_driver()),
        broken=Variant(lab={"event_ids": False}),
        fix=Variant(lab={"event_ids": True}),
        symptom_checks=(reconnected(), start_repeated()),
        cure_checks=(reconnected(), resumed_with_last_event_id(), checks.text_is_script(),
                     checks.complete_with_done()),
        explanation=(
            "EventSource reconnects by itself when a stream drops (after `retry`, 3 s by default in "
            "Chromium). Without `id:` fields the reconnection is a new request: the server starts the "
            "answer again and the page appends it to what it had, so the start arrives twice (a client "
            "that dedups by position loses tokens instead). With an `id:` on every event, the browser "
            "sends `Last-Event-ID` on reconnecting and a server that honours it sends only what the "
            "page has not seen. Here the server regenerates the same deterministic answer and skips "
            "the frames up to that id; a server with sampled answers keeps each response's frames "
            "for a while, keyed by response id. EventSource can only GET: the lab's server takes the "
            "request as JSON in the `request` query parameter for it."),
        fix_summary="`id: N` on every SSE event, and resume after `Last-Event-ID` on the server (`event_ids`)",
        scaled=(Scaled("drop", "after 5 tokens, every connection without ids",
                       "a load balancer or network failure mid-answer"),),
        sources=(f"{SSE_SPEC}#the-last-event-id-header", f"{SSE_SPEC}#concept-event-stream-reconnection-time"),
    ),
    Scenario(
        name="browser-connection-limit",
        layer="client",
        symptom="the seventh chat tab stays blank until another answer ends",
        path=("nginx",),
        base="fixed",
        workload=Workload(streams=HTTP1_CONNECTIONS_PER_ORIGIN + 1,
                          concurrency=HTTP1_CONNECTIONS_PER_ORIGIN + 1, tokens_per_s=5.0,
                          script="A token stream should reach the reader one token at a time.",
                          driver=chromium_driver()),
        # The synthetic engine: seven prefills one after another would blur TTFT (labs/catalogue/common.py).
        broken=Variant(server_args=MANY_STREAMS_SERVER),
        fix=Variant(proxy={"nginx": {"tls_http2": True}}),
        symptom_checks=(all_started_together(), protocol_is("http/1.1"), checks.ttft_spread_at_least(0.5)),
        cure_checks=(all_started_together(), protocol_is("h2"),
                     checks.ttft_p99_within(STREAM_SLACK_INTERVALS), checks.complete_with_done()),
        explanation=(
            "Over HTTP/1.1 a browser opens at most six connections to one origin (scheme, host, port), "
            "and a stream holds its connection until it ends. A seventh concurrent stream (another "
            "tab, a second panel, a notifications feed) waits in the browser's own queue, before any "
            "byte leaves: its first token comes only when another answer has finished. No server or "
            "proxy log shows the wait. Over HTTP/2 (which browsers speak only over TLS) all streams "
            "share one connection, up to the server's SETTINGS_MAX_CONCURRENT_STREAMS (nginx: 128). "
            "The fix serves the page and the API over TLS with HTTP/2 (nginx `listen ... ssl http2`), "
            "or keeps one shared stream per page."),
        fix_summary="listen 443 ssl http2; (HTTP/2 over TLS: every stream on one connection)",
        finding=(
            "Measured here in Chromium: over HTTP/1.1 six streams started at once and the seventh's "
            "first token came after one of them ended; over HTTP/2 to the same nginx all seven "
            "started on time, as Resource Timing's nextHopProtocol `h2` shows."),
        sources=("https://developer.mozilla.org/en-US/docs/Web/API/Server-sent_events/Using_server-sent_events",
                 "https://nginx.org/en/docs/http/ngx_http_v2_module.html",
                 "https://developer.mozilla.org/en-US/docs/Web/API/PerformanceResourceTiming/nextHopProtocol"),
    ),
]
