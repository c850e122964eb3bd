"""Client-library scenarios: the stream reaches the client intact and on time, and the library (or
the parsing code on top of it) delays or mangles it. The real library runs in the measuring
process (labs/client/libraries.py), timed against the server's `sent_at` stamps."""
from __future__ import annotations

from labs.scenario import checks
from labs.catalogue.nginx import CLOSE_DELIMITED_SERVER
from labs.scenario.model import Scenario, Variant, Workload

REQUESTS_ITER_LINES = "https://requests.readthedocs.io/en/latest/api/#requests.Response.iter_lines"
HTTPX_STREAMING = "https://www.python-httpx.org/quickstart/#streaming-responses"
SSE_SPEC = "https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation"
INCREMENTAL_DECODER = "https://docs.python.org/3/library/codecs.html#codecs.getincrementaldecoder"
AIOHTTP_STREAMS = "https://docs.aiohttp.org/en/stable/streams.html"
AIOHTTP_SESSION = "https://docs.aiohttp.org/en/stable/client_reference.html#aiohttp.ClientSession"

# Japanese and emoji (skin tones, ZWJ sequences): three- and four-byte characters everywhere, so a
# cut at a random byte often falls inside one.
MULTIBYTE_SCRIPT = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る。東京で寿司を食べました。👍🏽 👩🏽‍🚒 👩‍👩‍👧‍👦"
SPLIT_BYTES = (1, 40)  # client-naive-parser: the relay's piece sizes
SPLIT_SEED = 7
STAMPED = {"stamp": True, "heartbeat_s": 0}
# client-line-limit: one tool result or image per event (the server's largest pad, 1 MiB);
# aiohttp 3.14's line reader gives up past 512 KiB.
BIG_EVENT_BYTES = 1_048_576
AIOHTTP_LINE_LIMIT = 512 * 1024

SCENARIOS = [
    Scenario(
        name="client-requests-iter-lines",
        layer="client",
        symptom="the Python client shows each token one token late, but only behind some hops",
        # A hop that speaks HTTP/1.0 upstream: the server answers close-delimited.
        path=("relay",),
        workload=Workload(lab=STAMPED),
        broken=Variant(proxy={"relay": {"upstream_http": "1.0"}}, server_args=CLOSE_DELIMITED_SERVER,
                       client={"library": "requests-iter-lines"}),
        fix=Variant(client={"library": "httpx-iter-lines"}),
        symptom_checks=(checks.close_delimited(), checks.hop_delay_at_least(0.5), checks.complete_with_done()),
        cure_checks=(checks.close_delimited(), checks.hop_delay_at_most(0.25), checks.complete_with_done(),
                     checks.text_is_script()),
        explanation=(
            "`requests`' `iter_lines()` reads the body in chunks of 512 bytes (its default chunk_size) "
            "and yields a line only once a chunk holding its end is complete. On a chunked answer "
            "urllib3 hands over each HTTP chunk as it comes, so nothing shows; on a close-delimited "
            "answer (an HTTP/1.0 hop, a proxy with chunked encoding off) a read waits for 512 bytes "
            "or the end of the body, and each event waits for the bytes of the next. httpx's "
            "`iter_lines()`, httpx-sse and the OpenAI SDK read what is there; with requests, pass "
            "`chunk_size=1` (or read the raw socket)."),
        fix_summary="httpx: `with client.stream('POST', url, json=body) as r: for line in r.iter_lines()` "
                    "(or requests' `iter_lines(chunk_size=1)`)",
        finding=(
            "Measured here (requests 2.34.2, httpx 0.28.1, openai 3.57, events of ~190 bytes at 10 "
            "tok/s, every event stamped by the server): on the close-delimited answer requests' "
            "`iter_lines()` handed over events a median 103 ms (one interval) after the server wrote "
            "them (217 ms at worst), `iter_lines(chunk_size=1)` 1.9 ms, httpx `iter_lines()` 0.7 ms, "
            "the OpenAI SDK 1.1 ms. On the chunked answer requests added 0.5 ms: no lag at all."),
        sources=(REQUESTS_ITER_LINES, HTTPX_STREAMING),
    ),
    Scenario(
        name="client-naive-parser",
        layer="client",
        symptom="the chat shows U+FFFD in Japanese and emoji, on some networks only",
        # A hop that re-splits the byte stream at random 1-40 byte offsets, the same ones every run.
        path=("relay",),
        workload=Workload(script=MULTIBYTE_SCRIPT, lab=STAMPED),
        broken=Variant(proxy={"relay": {"split": SPLIT_BYTES, "seed": SPLIT_SEED}},
                       client={"library": "decode-per-read"}),
        fix=Variant(client={"library": "buffered-sse"}),
        symptom_checks=(checks.resplit(), checks.replacement_chars_at_least(1)),
        cure_checks=(checks.resplit(), checks.text_is_script(), checks.complete_with_done()),
        explanation=(
            "TCP delivers bytes, not events: a read can end inside an event and inside a UTF-8 "
            "character, wherever a hop, TLS record or the kernel cut the stream. Client code that "
            "decodes each read on its own turns a character split across two reads into U+FFFD; code "
            "that `json.loads` each read's `data:` lines loses every event a read cut. Locally, and "
            "behind most proxies, each event arrives in one read and the bug stays hidden. Buffer "
            "bytes up to the blank line that ends an event and decode complete lines (or decode "
            "incrementally), as an SSE parser does."),
        fix_summary="buffer bytes to the blank line, then decode (or codecs.getincrementaldecoder('utf-8'))",
        finding=(
            "Measured here (seeded re-split at 1-40 bytes, ~650 reads for 43 events): decoding each "
            "read alone gave 6 and 12 U+FFFD in two runs with different seeds; `json.loads` per read "
            "lost every event (0 of 43 parsed); the buffering parser got every event, exact text. "
            "The counts vary with the cuts: the checks ask for more than zero, never a number."),
        sources=(SSE_SPEC, INCREMENTAL_DECODER),
    ),
    Scenario(
        name="client-line-limit",
        layer="client",
        symptom="the Python app's answer ends at once when the model returns a big tool result or "
                "image; short answers work",
        path=(),
        workload=Workload(script="A tool result arrives whole.", lab={**STAMPED, "pad_bytes": BIG_EVENT_BYTES}),
        broken=Variant(client={"library": "aiohttp-lines"}),
        fix=Variant(client={"library": "aiohttp-events"}),
        symptom_checks=(checks.client_error_names("LineTooLong"), checks.content_events_at_most(0)),
        cure_checks=(checks.complete_with_done(), checks.text_is_script(),
                     checks.data_bytes_per_event_at_least(AIOHTTP_LINE_LIMIT, "over aiohttp's line limit")),
        explanation=(
            "An SSE event is one `data:` line, however large: a tool call's arguments, a retrieved "
            "document or a base64 image make lines of megabytes. aiohttp's `async for line in "
            "response.content` reads line by line into a bounded buffer and raises `LineTooLong` "
            "(\"Got more than 524288 bytes when reading\") at the first line past it; the "
            "exception ends the loop, and an app that catches it shows the answer cut where it "
            "was, or nothing. Read chunks (`iter_any()`, `iter_chunked()`) and split on the blank "
            "line that ends an event; raising the session's `read_bufsize` only moves the limit "
            "(it is twice the buffer size)."),
        fix_summary="`async for chunk in response.content.iter_any()`, bytes buffered to the blank line; "
                    "not `async for line in response.content`",
        finding=(
            "Measured here (aiohttp 3.14.5, 14 data events of ~1.05 MB each, 10 tok/s): the line "
            "loop raised LineTooLong at the role chunk, 0 content events, 0.02 s in; reading chunks "
            "got all 14 events and the exact text in 1.33 s. At 200 KB per event both loops worked. The "
            "limit is twice the session's `read_bufsize`: 128 KiB at 2**16, 512 KiB at 2**18 (3.14's "
            "default), 1 MiB at 2**19, each measured failing on these events. "
            "httpx `iter_lines()` and the OpenAI SDK read the same 15.7 MB stream whole (1.4 s); "
            "requests' `iter_lines()` too, but in 8.9 s: it re-scans its pending bytes for every "
            "512-byte chunk."),
        sources=(AIOHTTP_STREAMS, AIOHTTP_SESSION),
    ),
]
