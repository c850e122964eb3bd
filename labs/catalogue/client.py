"""Client-layer scenarios: every hop streams, and the client still spoils it."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload

HTTPX_TIMEOUTS = "https://www.python-httpx.org/advanced/timeouts/"
OPENAI_STREAMING = "https://github.com/openai/openai-python#streaming-responses"
READ_TIMEOUT_S = 1.0  # client-read-timeout: the broken client's read timeout (its stress checks too)
# client-undici-timeout: the broken dispatcher's bodyTimeout, standing for undici's 300 s default.
UNDICI_BODY_TIMEOUT_S = 2.0
UNDICI_DOCS = "https://undici.nodejs.org/#/docs/api/Client?id=parameter-clientoptions"
NODE_FETCH = "https://nodejs.org/api/globals.html#fetch"
PRIVOXY_FILTER = "https://www.privoxy.org/user-manual/actions-file.html#FILTER"
PRIVOXY_CONNECT = "https://www.privoxy.org/faq/misc.html#SSL"

SCENARIOS = [
    Scenario(
        name="client-read-body",
        layer="client",
        symptom="every proxy streams, yet the app shows the answer all at once",
        # Behind nginx with its production settings: the hop streams, as the socket reads show.
        path=("nginx",),
        base="fixed",
        workload=Workload(),
        broken=Variant(client={"mode": "read-body"}),
        fix=Variant(client={"mode": "stream"}),
        symptom_checks=(checks.held_to_end(), checks.socket_reads_spread()),
        cure_checks=(checks.streamed(), checks.complete_with_done()),
        explanation=(
            "A client that reads the whole response body before looking at it (a non-streaming call, "
            "`response.text`, `requests.post(...).json()`, `await response.aread()`) makes TTFT equal "
            "E2E however well every hop streams: the bytes arrive token by token (one socket read per "
            "event here) and wait in the client's buffer until the last one. Iterate the stream "
            "instead: `stream=True` and `for chunk in stream` with the OpenAI SDK, "
            "`client.stream(...)` + `iter_lines()` with httpx, `curl -N`."),
        fix_summary="iterate the stream: `for chunk in client.chat.completions.create(..., stream=True)`",
        sources=(OPENAI_STREAMING, "https://www.python-httpx.org/quickstart/#streaming-responses"),
    ),
    Scenario(
        name="client-read-timeout",
        layer="client",
        symptom="answers that pause to think fail with ReadTimeout in the client",
        path=(),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 3.0, "heartbeat_s": 0}),
        broken=Variant(client={"read_timeout_s": READ_TIMEOUT_S}),
        fix=Variant(client={"read_timeout_s": 10.0}),
        symptom_checks=(checks.outcome_is("timeout"), checks.status_is(200), checks.content_events_at_most(5),
                        checks.cut_after_silence(READ_TIMEOUT_S, "the client's read timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(READ_TIMEOUT_S, "the broken client's read timeout")),
        explanation=(
            "A client's read timeout bounds the silence between two reads, like a proxy's idle "
            "timeout. httpx's default is 5 s (and the OpenAI SDK's 600 s, but many apps pass "
            "`timeout=5`): a model that goes quiet for longer (a tool call, a long reasoning step, a "
            "queue) makes the client give up mid-stream with ReadTimeout, although the server is fine. "
            "Set the read timeout above the longest silence you expect, and have the server send "
            "heartbeats (`: ping`), which reset it."),
        fix_summary="httpx.Timeout(connect=5, read=<longest silence + margin>), plus server heartbeats",
        finding=(
            "Measured here with httpx itself (`httpx.Timeout(5, read=1)`, `iter_lines()`, the same "
            "3 s silence): ReadTimeout after 1.4 s without heartbeats; with a `: ping` every 0.25 s "
            "the same client read the whole stream to [DONE], since every byte resets the read "
            "timeout. The measuring client behaves the same (complete, 12 pings seen)."),
        scaled=(Scaled("client read timeout", "1s", "5s (httpx's default)"),
                Scaled("silence mid-stream", "3s", "a tool call or a long reasoning step")),
        sources=(HTTPX_TIMEOUTS,),
    ),
    Scenario(
        name="client-undici-timeout",
        layer="client",
        symptom="the Node app's answers die with `TypeError: terminated` when the model thinks "
                "for minutes, whatever timeout the SDK was given",
        path=(),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 3.5, "heartbeat_s": 0}),
        broken=Variant(client={"library": "node-fetch", "body_timeout_s": UNDICI_BODY_TIMEOUT_S}),
        fix=Variant(client={"library": "node-fetch", "body_timeout_s": 0}),
        symptom_checks=(checks.outcome_is("timeout"), checks.status_is(200), checks.content_events_at_most(5),
                        checks.client_error_names("UND_ERR_BODY_TIMEOUT"),
                        checks.cut_after_silence(UNDICI_BODY_TIMEOUT_S, "undici's bodyTimeout")),
        cure_checks=(checks.complete_with_done(), checks.text_is_script(),
                     checks.silence_outlasted(UNDICI_BODY_TIMEOUT_S, "the broken bodyTimeout")),
        explanation=(
            "Node's built-in `fetch` is undici, and undici's dispatcher ends a response body that "
            "stays silent longer than `bodyTimeout` (300 s by default) between two chunks: the "
            "`for await` over the body throws `TypeError: terminated`, its `cause` a "
            "`BodyTimeoutError` (`UND_ERR_BODY_TIMEOUT`). The timeout of an SDK built on fetch (the "
            "OpenAI and Anthropic JavaScript SDKs' `timeout`, an AbortSignal) does not lift it: the "
            "dispatcher's limit lies below them. A reasoning model that thinks for minutes before "
            "its next token meets it. Pass a dispatcher with `bodyTimeout: 0` (or above the longest "
            "silence), or have the server send `: ping` heartbeats, which every chunk resets."),
        fix_summary="`fetch(url, { dispatcher: new Agent({ bodyTimeout: 0 }) })` (npm undici), "
                    "plus server heartbeats",
        finding=(
            "Measured here (Node 20.20 with its bundled undici 6.24.1, the npm undici 6.24.1 Agent as "
            "fetch's dispatcher, a 3.5 s silence after 5 tokens): `bodyTimeout: 2000` cut the body "
            "2.1 s into the silence with `TypeError: terminated`, cause `UND_ERR_BODY_TIMEOUT` "
            "(\"Body Timeout Error\"), after the 5 tokens; `bodyTimeout: 0` and Node's default "
            "dispatcher read the stream to [DONE], and so did `bodyTimeout: 2000` with the server's "
            "`: ping` every 0.25 s (14 pings read). undici checks its timeouts on a coarse clock (a "
            "tick of about 0.5 s): a bodyTimeout of 0.3 s or 0.5 s cut after 0.99 s of silence, 1 s "
            "after 1.49 s, 2 s after 2.49 s."),
        scaled=(Scaled("undici bodyTimeout", f"{UNDICI_BODY_TIMEOUT_S:g}s", "300s (undici's default)"),
                Scaled("silence mid-stream", "3.5s", "minutes of reasoning before the next token")),
        sources=(UNDICI_DOCS, NODE_FETCH),
    ),
    Scenario(
        name="corp-inspecting-proxy",
        layer="client",
        kind="buffering",
        symptom="the chat streams at home; at the office the answer appears all at once",
        path=("privoxy",),
        workload=Workload(),
        # The office's HTTP_PROXY: Privoxy with Debian's shipped actions, the client asking it for
        # an http:// URL (absolute-form, as any client with HTTP_PROXY set does).
        broken=Variant(),
        fix=Variant(proxy={"privoxy": {"unfiltered_upstream": True}}),
        symptom_checks=(checks.content_encoded(None), checks.held_to_end(),
                        checks.finding("buffering")),
        cure_checks=(checks.streamed(), checks.complete_with_done(), checks.text_is_script(),
                     checks.no_finding("buffering")),
        explanation=(
            "A forward proxy on the user's network (HTTP_PROXY, a scanning or filtering gateway) "
            "sees a plain-http answer whole and may rewrite it: Privoxy with the actions Debian "
            "ships (match-all.action turns six content filters on for every site) reads a text "
            "body to its end before it filters and forwards it, and an event stream is text: "
            "the stream arrives as one lump when the answer is complete, with a 200 and "
            "no error anywhere. At home, without the proxy, the same client streams. An https:// "
            "URL goes through the same proxy as a CONNECT tunnel of bytes it cannot read, so it "
            "streams; that is why the failure is \"only over http\", on intranet and dev URLs. "
            "Fix: the API over https, or an exception for the API's host in the proxy (Privoxy: "
            "`{ -filter }` for it in user.action), or NO_PROXY for it where it is reachable "
            "directly."),
        fix_summary="user.action: `{ -filter }` followed by the API's host",
        finding=(
            "Measured here (Privoxy 3.0.34 from Debian 12, 20 events at 10 tok/s): TTFT = E2E = "
            "2,008-2,011 ms, all 21 events in one read; with `{ -filter }` for the upstream TTFT "
            "14-18 ms, one read per event. A 6.7 s answer through Debian's Privoxy: TTFT 6,703 ms, "
            "1 read for 68 events; the same through it as a CONNECT tunnel (curl -p): first event "
            "17-19 ms. Squid 5.7 as the forward proxy streamed it (TTFT 3-5 ms, 68 reads, its "
            "`Via` header on the answer): not every forward proxy holds a stream."),
        sources=(PRIVOXY_FILTER, PRIVOXY_CONNECT),
    ),
]
