"""MCP over Streamable HTTP through the proxies (issue 44): an MCP origin's replicas behind one
proxy, an official SDK's client in front (the Python SDK's, the TypeScript SDK's where it behaves
otherwise, the same in Chromium for a browser: labs/scenario/mcp_clients.py). In the catalogue's one table like every scenario:
`python -m labs run mcp-session-affinity` runs every variant on every proxy it names and prints
what the client and the replicas saw (docs/mcp.md).
"""
from __future__ import annotations

from labs.catalogue.http2 import FLUSH_COMMIT, HEADERS_FLUSHED, SSE_PARSING, V2_DOCS
from labs.scenario import mcp_checks as checks
from labs.scenario import mcp_cors_checks as cors
from labs.scenario import mcp_stream_checks as streams
from labs.scenario.mcp_clients import CHROMIUM, McpClientName
from labs.scenario.mcp_model import McpFix, McpScenario, McpVariant, McpWorkload

NGINX_UPSTREAM = "https://nginx.org/en/docs/http/ngx_http_upstream_module.html"
HAPROXY = "https://docs.haproxy.org/3.2/configuration.html"
STREAMABLE_HTTP = "https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#session-management"

NGINX_PROXY = "https://nginx.org/en/docs/http/ngx_http_proxy_module.html"
NGINX_HEADERS = "https://nginx.org/en/docs/http/ngx_http_headers_module.html"
SSE_STARLETTE_PING = "https://github.com/sysid/sse-starlette/blob/main/sse_starlette/sse.py"
TS_KEEPALIVE = "https://github.com/modelcontextprotocol/typescript-sdk/pull/2538"

SESSIONS = 4  # sessions per run, one after another, each initialize and two tool calls
LOOKALIKE_SESSIONS = 12
ONE_CALL = McpWorkload(sessions=1, calls=1, replicas=1)  # one session of one tool call, one replica
KEPT_ON_ONE = (checks.sessions_complete(), checks.each_session_on_one_replica())
# Affinity learnt per session: the sessions still spread over both replicas (the precondition: two
# replicas really answered), each kept on its own.
KEPT_AND_SPREAD = (*KEPT_ON_ONE, checks.requests_spread(how="the sessions spread over them"))

# mcp-idle-stream: the field's idle limits (60-300 s) scaled to 1 s; keep-alives well inside it.
IDLE_LIMIT_S = 1.0
KEEPALIVE_S = 0.3
RAISED_LIMIT = "30s"  # above the session's whole idle time: nothing is cut
# After the tool returns (~0.6 s): past the client's second cut, which came 3.0-7.7 s into the
# session in the runs measured (through nginx the 2.3 client noticed the first cut 0.9-4.7 s
# late), with 4 s to spare, and within the hold.
NOTIFY_AFTER_S = 12.0
IDLE_HOLD_S = 14.0

# mcp-cors-expose: CORS for any page (`*`: the SDK's README and most deployed servers; the SDK's
# client sends no credentials, so `*` is enough), and the request headers a browser MCP client sends.
ANY_ORIGIN = "*"
MCP_REQUEST_HEADERS = "mcp-session-id,mcp-protocol-version,last-event-id"
PAGE_ON_ANOTHER_ORIGIN = (cors.ran_cross_origin(), cors.preflighted("ok"))
FETCH_CORS = "https://fetch.spec.whatwg.org/#http-access-control-expose-headers"
PYTHON_SDK_CORS = "https://github.com/modelcontextprotocol/python-sdk/pull/1059"

# The TypeScript SDK's client (labs/scenario/mcp_clients.py), where it behaves otherwise than the
# Python one; its rows run on the current release only (the proxy's part is the Python rows').
TS: McpClientName = "typescript-sdk"
# Each session is a Node process (its start 0.3-1 s on this machine): two sessions, one per replica,
# prove the split as four do.
TS_SESSIONS = 2
# It never gives up on a cut GET stream: one cut and reopening every IDLE_LIMIT_S + its 1 s delay
# (measured 2.00-2.02 s through nginx 1.30.6, 2.01 through HAProxy 3.2.26), so its GETs open about
# 0, 2 and 4 s into the session and are cut at 1, 3 and 5 s. The tool returns ~0.6 s in: its
# notification goes 3.5 s in, mid-way through the second cut, 0.5 s from either edge.
TS_HOLD_S = 4.0
TS_NOTIFY_AFTER_S = 2.9
# Node's fetch (undici) cuts a body silent for its bodyTimeout, 300 s by default (the field's
# `TypeError: terminated` at 301 s), scaled to 1 s through the transport's `fetch` option; measured
# cut 1.4-1.5 s after the GET opened (undici's timers above 1 s tick every 0.5 s: lib/util/timers.js).
BODY_TIMEOUT_S = 1.0
UNDICI_TIMER_RESOLUTION_S = 1.0
TS_IDLE = McpVariant(client_sdk=TS, origin={"notify_after_s": TS_NOTIFY_AFTER_S}, client={"hold_s": TS_HOLD_S})
TS_BODY_TIMEOUT = TS_IDLE.then(McpVariant(proxy={"nginx": {"proxy_read_timeout": RAISED_LIMIT}},
                                          client={"body_timeout_s": BODY_TIMEOUT_S}))

# mcp-progress-buffered: the chat server's token pace, for long enough that lumps show.
PROGRESS_INTERVAL_S = 0.05
PROGRESS_DURATION_S = 1.0

# mcp-held-headers: the SDK's 15 s keep-alive, the GET stream's first body byte, scaled to 2 s; the
# GET read alone on its connection for a second more (the official client's own GET shares its
# connection with the `initialized` POST, whose 202 flushed the held headers: 2-5 ms, docs/mcp.md).
HELD_SILENCE_S = 2.0
OVER_H2 = {"http2": True, "verify_tls": False, "lone_get_s": HELD_SILENCE_S + 1}  # the self-signed loopback certificate

SCENARIOS: tuple[McpScenario, ...] = (
    McpScenario(
        name="mcp-session-affinity",
        symptom="MCP tool calls fail with 'Session not found' as soon as the server has two replicas",
        proxies=("nginx", "haproxy"),
        workload=McpWorkload(sessions=SESSIONS, calls=2, replicas=2),
        # Two stateful replicas on the 1.x SDK most servers run (the 2025 revisions' sessions, its
        # default) behind the proxy's default balancing, round-robin; the client opens its session
        # with initialize, the only handshake a 1.x server answers.
        broken=McpVariant(origin={"sessions": True}, client={"mode": "legacy"}, sdk="1.30"),
        fixes=(
            McpFix("one-replica", McpVariant(replicas=1), ("nginx", "haproxy"),
                   (*KEPT_ON_ONE, checks.one_replica_only()),
                   "scale to one replica (what most reports end with; no redundancy)", workaround=True),
            McpFix("client-address-hash", McpVariant(proxy={"nginx": {"upstream_hash": "$remote_addr"}}),
                   ("nginx",), KEPT_ON_ONE,
                   "nginx: hash $remote_addr; (a client address per replica)"),
            McpFix("stick-table", McpVariant(proxy={"haproxy": {"session_stick_table": True}}), ("haproxy",),
                   KEPT_AND_SPREAD,
                   "HAProxy: stick store-response res.hdr(mcp-session-id) + stick match req.hdr(mcp-session-id)"),
            McpFix("cookie", McpVariant(proxy={"haproxy": {"affinity_cookie": True}}), ("haproxy",),
                   KEPT_AND_SPREAD, "HAProxy: cookie SERVERID insert (the SDK's client keeps cookies)"),
            # By chance: each session passes when its id hashes to the replica that answered its
            # initialize (half the time with two); 12 sessions all passing: 1 in 4096.
            McpFix("session-header-hash",
                   McpVariant(proxy={"nginx": {"upstream_hash": "$http_mcp_session_id consistent"},
                                     "haproxy": {"balance": "hdr(Mcp-Session-Id)"}}, sessions=LOOKALIKE_SESSIONS),
                   ("nginx", "haproxy"), (checks.some_sessions_not_found(), checks.not_found_from_another_replica()),
                   "NOT a fix: hash $http_mcp_session_id / balance hdr(Mcp-Session-Id)", cures=False),
            # The same stateful replicas upgraded to mcp 2.3, which answers a 2026-07-28 client on
            # its stateless path whatever --sessions says, and the client speaking that revision.
            McpFix("stateless", McpVariant(client={"mode": "modern"}, sdk="2.3"), ("nginx", "haproxy"),
                   (checks.sessions_complete(), checks.requests_spread()),
                   "the 2026-07-28 revision, no sessions (mcp 2.3)"),
            # The TypeScript SDK's client fails earlier: its transport throws the initialized
            # notification's 404 out of connect(), before any tool call.
            McpFix("typescript-client", McpVariant(client_sdk=TS, sessions=TS_SESSIONS), ("nginx", "haproxy"),
                   (checks.sessions_refused_at_connect(),
                    checks.not_found_from_another_replica("notifications/initialized")),
                   "NOT a fix: the TypeScript SDK's client fails too, at connect()", cures=False),
            # Node's fetch keeps no cookies: the affinity cookie never comes back.
            McpFix("typescript-client-cookie", McpVariant(client_sdk=TS, sessions=TS_SESSIONS, proxy={"haproxy": {"affinity_cookie": True}}),
                   ("haproxy",), (checks.sessions_refused_at_connect(),
                                  checks.not_found_from_another_replica("notifications/initialized")),
                   "NOT a fix for a Node client: cookie SERVERID insert (Node's fetch keeps no cookies)",
                   cures=False),
            McpFix("typescript-client-stick-table",
                   McpVariant(client_sdk=TS, sessions=TS_SESSIONS, proxy={"haproxy": {"session_stick_table": True}}),
                   ("haproxy",),
                   KEPT_AND_SPREAD, "HAProxy's stick table keeps the TypeScript SDK's sessions too"),
        ),
        symptom_checks=(checks.sessions_not_found(), checks.not_found_from_another_replica()),
        explanation=(
            "In the 2025 revisions of MCP's Streamable HTTP transport a server that keeps sessions hands "
            "out an `Mcp-Session-Id` in its answer to `initialize`, and every later request must carry it "
            "to the same process: the session lives in that process's memory. A load balancer that sends "
            "requests in turn sends the next one (the `initialized` notification, then the tool call) to "
            "another replica, which does not know the id and answers 404; the official Python client "
            "raises `MCPError: Session not found` at its first tool call. One replica hides it. Keeping "
            "the session on its replica needs the balancer to learn the id from the response "
            "(HAProxy's stick table), a cookie the client sends back, or a per-client hash; hashing the "
            "`Mcp-Session-Id` header alone does not work, because `initialize` carries no id yet and is "
            "balanced elsewhere than where the id later hashes to. The 2026-07-28 revision has no "
            "sessions: every request stands alone and round-robin is fine."),
        finding=(
            "Measured here (`python -m labs run mcp-session-affinity`, and with `--proxy-version oldest`: "
            "nginx 1.30.6 and 1.22.1, HAProxy 3.2.26 and 2.6.12, two replicas of `python -m server.mcp` on "
            "mcp 1.30, the mcp 2.3 client in legacy mode): 4 of 4 sessions failed through either proxy on "
            "either release, every refused tool call answered by the replica that did not open the session; "
            "no release behaved differently. Hashing on the header (`hash $http_mcp_session_id consistent`, "
            "`balance hdr(Mcp-Session-Id)`) failed 4 and 8 of 12 sessions on the current releases, 6 and 4 "
            "on the oldest: initialize went round-robin (an empty key) and the id then hashed to the other "
            "replica about half the time. The SDK's client swallows the 404 on the `initialized` "
            "notification and on the GET stream; the tool call is the first failure its user sees. The "
            "TypeScript SDK's client (1.32.2) throws that 404 out of connect(); Node's fetch keeps no "
            "cookies, so HAProxy's affinity cookie does not keep its sessions, the stick table does."),
        sources=(STREAMABLE_HTTP, f"{NGINX_UPSTREAM}#hash", f"{HAPROXY}#4.2-stick%20store-response",
                 f"{HAPROXY}#4.2-cookie", "https://github.com/PrefectHQ/fastmcp/issues/482"),
    ),
    McpScenario(
        name="mcp-idle-stream",
        symptom="an idle MCP client stops receiving server notifications after the proxy's idle timeout; "
                "nothing reports an error",
        proxies=("nginx", "haproxy"),
        workload=ONE_CALL,
        # The proxy's idle limit scaled down from the field's 60-300 s to IDLE_LIMIT; the origin's
        # keep-alives off, as a TypeScript server before typescript-sdk#2538; one tool call, then
        # the client idles IDLE_HOLD_S while the origin sends a notification NOTIFY_AFTER_S later,
        # after the client's reconnect is spent.
        broken=McpVariant(proxy={"nginx": {"proxy_read_timeout": f"{IDLE_LIMIT_S:g}s"},
                                 "haproxy": {"timeout_server": f"{IDLE_LIMIT_S:g}s"}},
                          origin={"keepalive_s": 0.0, "notify_after_s": NOTIFY_AFTER_S},
                          client={"hold_s": IDLE_HOLD_S}),
        fixes=(
            McpFix("keepalive", McpVariant(origin={"keepalive_s": KEEPALIVE_S}), ("nginx", "haproxy"),
                   (streams.get_stream_held(IDLE_LIMIT_S), streams.notifications_received()),
                   "keep-alive comments from the server more often than the shortest idle limit "
                   "(the Python SDK's 15 s default; TypeScript: keepAliveMs)"),
            McpFix("raised-timeout",
                   McpVariant(proxy={"nginx": {"proxy_read_timeout": RAISED_LIMIT},
                                     "haproxy": {"timeout_server": RAISED_LIMIT}}), ("nginx", "haproxy"),
                   (streams.get_stream_held(IDLE_LIMIT_S), streams.notifications_received()),
                   "raise the proxy's idle limit on /mcp above the keep-alive interval "
                   "(nginx proxy_read_timeout, HAProxy timeout server)"),
            McpFix("typescript-client", TS_IDLE, ("nginx",),
                   (streams.get_stream_reopened_at_each_cut(IDLE_LIMIT_S, opens=3),
                    streams.notification_lost(IDLE_LIMIT_S)),
                   "NOT a fix: the TypeScript SDK's client reopens the GET stream after every cut, and loses "
                   "what is sent while it is down", cures=False),
            McpFix("typescript-client-keepalive", TS_IDLE.then(McpVariant(origin={"keepalive_s": KEEPALIVE_S})),
                   ("nginx",), (streams.get_stream_held(IDLE_LIMIT_S), streams.notifications_received()),
                   "keep-alive comments keep the TypeScript SDK's GET stream open too"),
            # The idle limit in the client itself: the proxy's raised, Node's fetch cuts the stream.
            McpFix("node-fetch-body-timeout", TS_BODY_TIMEOUT, ("nginx",),
                   (streams.get_stream_reopened_at_each_cut(BODY_TIMEOUT_S, opens=2, late_s=UNDICI_TIMER_RESOLUTION_S),),
                   "NOT a fix: a raised proxy limit leaves Node's fetch bodyTimeout (300 s) to cut the "
                   "silent GET stream", cures=False),
            McpFix("node-fetch-body-timeout-keepalive",
                   TS_BODY_TIMEOUT.then(McpVariant(origin={"keepalive_s": KEEPALIVE_S})), ("nginx",),
                   (streams.get_stream_held(BODY_TIMEOUT_S), streams.notifications_received()),
                   "keep-alive comments more often than Node's fetch bodyTimeout (300 s)"),
        ),
        symptom_checks=(streams.get_stream_cut_then_abandoned(IDLE_LIMIT_S), streams.notification_lost(IDLE_LIMIT_S)),
        explanation=(
            "The standalone GET stream carries only the server's own notifications, so an idle session's "
            "stream is silent by design and every idle limit on the way cuts it (the field: 125 s at a CDN, "
            "300 s HTTP/2 CANCEL, Node's fetch 'terminated' at 301 s). The official Python client (mcp 2.3) "
            "reopens it after the server's `retry:` or 1 s, and after two failures in a row stops "
            "listening, logging at debug level only: the session goes on, tool calls work, and every "
            "server notification after that is lost. A keep-alive comment more often than the shortest "
            "idle limit keeps the stream alive (the Python SDK's sse-starlette pings every 15 s by "
            "default; the TypeScript SDK only since #2538); raising the proxy's limit on the MCP route "
            "above that interval is the other half."),
        finding=(
            "Measured here (`python -m labs run mcp-idle-stream`, and with `--proxy-version oldest`: nginx "
            "1.30.6 and 1.22.1, HAProxy 3.2.26 and 2.6.12, one replica on mcp 2.3, the 2.3 client): with a 1 s "
            "idle limit and no keep-alives the GET stream was cut, reopened once and abandoned, and the server "
            "notification sent 12 s after the call never arrived, with no error, on every proxy and release; "
            "pings every 0.3 s or a 30 s limit kept one GET for the 14.6 s session and delivered it. Through "
            "nginx the client noticed its first cut 0.9-4.7 s late (nginx logged 1.001 s). The TypeScript "
            "SDK's client (1.32.2) reopens the stream 1 s after every cut, for good, and loses what is sent "
            "in between; Node's fetch cuts a silent stream itself at its bodyTimeout (300 s; 1 s here)."),
        sources=(f"{NGINX_PROXY}#proxy_read_timeout", f"{HAPROXY}#4.2-timeout%20server", SSE_STARLETTE_PING,
                 TS_KEEPALIVE, "https://github.com/robhunter/agentdeals/issues/1098"),
    ),
    McpScenario(
        name="mcp-progress-buffered",
        symptom="a long MCP tool call's progress notifications arrive in lumps, late, through HAProxy",
        proxies=("haproxy",),
        workload=McpWorkload(sessions=1, calls=2, replicas=1),
        broken=McpVariant(origin={"progress_interval_s": PROGRESS_INTERVAL_S, "duration_s": PROGRESS_DURATION_S}),
        fixes=(
            McpFix("http-no-delay", McpVariant(proxy={"haproxy": {"http_no_delay": True}}), ("haproxy",),
                   (streams.progress_streams(PROGRESS_DURATION_S, PROGRESS_INTERVAL_S),),
                   "HAProxy: option http-no-delay"),
            # Not a fix but the lesson that nginx needs none: its default proxy_buffering on holds
            # nothing here, because the SDK's SSE responses carry X-Accel-Buffering: no.
            McpFix("proxy-buffering-on", McpVariant(proxy={"nginx": {"proxy_buffering": True}}), ("nginx",),
                   (streams.progress_streams(PROGRESS_DURATION_S, PROGRESS_INTERVAL_S),),
                   "nginx needs nothing: proxy_buffering on (its default) streams them, the SDK's SSE "
                   "responses carry X-Accel-Buffering: no", workaround=True),
        ),
        symptom_checks=(streams.progress_in_lumps(PROGRESS_DURATION_S, PROGRESS_INTERVAL_S),),
        explanation=(
            "A tool that works for a while reports progress on the POST's SSE stream, one notification at a "
            "time. HAProxy at its defaults sends a small write with MSG_MORE, so the kernel holds it for more "
            "(the chat scenarios' coalescing): the notifications arrive about every 200 ms, four at a time, "
            "the first late. `option http-no-delay` sends each at once. nginx's buffering, the usual suspect, "
            "holds nothing: the Python SDK answers every SSE stream with sse-starlette's `EventSourceResponse`, "
            "which sets `X-Accel-Buffering: no`, and "
            "nginx obeys it whatever `proxy_buffering` says."),
        finding=(
            "Measured here (`python -m labs run mcp-progress-buffered`, and with `--proxy-version oldest`: "
            "HAProxy 3.2.26 and 2.6.12, nginx 1.30.6 and 1.22.1, one replica on mcp 2.3, 20 notifications "
            "50 ms apart): through HAProxy at its defaults 20 arrived in 5 lumps, the first after 213-225 ms, "
            "on both releases; with http-no-delay and through nginx 20 in 20, the first after 4-20 ms."),
        sources=(f"{HAPROXY}#4.2-option%20http-no-delay", f"{NGINX_PROXY}#proxy_buffering",
                 "https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/progress"),
    ),
    McpScenario(
        name="mcp-cors-expose",
        symptom="a browser MCP client (an agent UI, the MCP Inspector) on another origin connects, then every "
                "request fails with 400 'Missing session ID'",
        proxies=("nginx", "haproxy"),
        workload=ONE_CALL,
        # The official TypeScript SDK's client in Chromium on a page of its own origin (another
        # port), through a proxy that answers CORS (the origin, like the Python SDK's, sends none)
        # and allows the MCP request headers, but exposes no response header.
        broken=McpVariant(proxy={"nginx": {"cors_allow_origin": ANY_ORIGIN}, "haproxy": {"cors_allow_origin": ANY_ORIGIN}},
                          client_sdk=CHROMIUM),
        fixes=(
            McpFix("expose-session-id", McpVariant(proxy={"nginx": {"cors_expose_headers": ("Mcp-Session-Id",)},
                                                          "haproxy": {"cors_expose_headers": ("Mcp-Session-Id",)}}),
                   ("nginx", "haproxy"), (*PAGE_ON_ANOTHER_ORIGIN, cors.origin_issued_session(), cors.session_read_and_sent(),
                                checks.sessions_complete()),
                   "the proxy: Access-Control-Expose-Headers: Mcp-Session-Id (nginx add_header ... always, "
                   "HAProxy http-after-response set-header), with the request headers allowed"),
            McpFix("origin-cors",
                   McpVariant(proxy={"nginx": {"cors_allow_origin": None}},
                              origin={"cors_origin": ANY_ORIGIN, "cors_expose_headers": "Mcp-Session-Id",
                                      "cors_allow_headers": MCP_REQUEST_HEADERS}),
                   ("nginx",), (*PAGE_ON_ANOTHER_ORIGIN, cors.origin_issued_session(), cors.session_read_and_sent(),
                                checks.sessions_complete()),
                   "the server: CORSMiddleware(expose_headers=['Mcp-Session-Id'], allow_headers=[the "
                   "MCP request headers])"),
            # The Python SDK's README snippet (python-sdk#1059): expose_headers, no allow_headers.
            # initialize passes (its only non-safelisted header, Content-Type, Starlette always
            # allows); the next request's preflight asks for mcp-session-id and is refused.
            McpFix("origin-cors-expose-only",
                   McpVariant(proxy={"nginx": {"cors_allow_origin": None}},
                              origin={"cors_origin": ANY_ORIGIN, "cors_expose_headers": "Mcp-Session-Id"}),
                   ("nginx",), (cors.ran_cross_origin(), cors.preflighted("refused"), cors.origin_issued_session(),
                                cors.refused_by_the_browser()),
                   "NOT a fix: CORSMiddleware(expose_headers=['Mcp-Session-Id']) alone, as the SDK's "
                   "README shows it", cures=False),
            McpFix("stateless", McpVariant(origin={"sessions": False}), ("nginx",),
                   (*PAGE_ON_ANOTHER_ORIGIN, cors.origin_issued_session(issued=False), checks.sessions_complete()),
                   "a stateless server (no session id to read; the 2026-07-28 revision)"),
        ),
        symptom_checks=(*PAGE_ON_ANOTHER_ORIGIN, cors.origin_issued_session(), cors.session_hidden_then_missing()),
        explanation=(
            "A page's JavaScript can read a cross-origin response header only if it is CORS-safelisted "
            "or named in `Access-Control-Expose-Headers`. A stateful MCP server answers `initialize` "
            "with `Mcp-Session-Id`; through a hop (or a server) that allows the page's origin but "
            "exposes nothing, the browser hides it, the TypeScript SDK's transport reads null and sends "
            "every later request without a session, and the server answers 400. Its preflight must "
            "also allow the request headers the SDK sends after `initialize` (`mcp-session-id`, "
            "`mcp-protocol-version`, `last-event-id`), or the browser refuses the request before it "
            "leaves and the SDK sees only `Failed to fetch`. A stateless server issues no id and needs "
            "neither header."),
        finding=(
            "Measured here (`python -m labs run mcp-cors-expose`, and with `--proxy-version oldest`: nginx "
            "1.30.6 and 1.22.1, HAProxy 3.2.26 and 2.6.12, one replica on mcp 2.3, the TypeScript SDK 1.32.2's "
            "client in Chromium from a page on another loopback port): without the exposed header the page read "
            "no session id and the `initialized` notification was answered 400 `Bad Request: Missing session ID` "
            "(mcp 1.30 the same, by hand), which `connect()` raised, on every proxy and release; exposing it "
            "(the proxy, or the server's CORSMiddleware) completed the session. The Python SDK's README snippet "
            "(expose_headers without allow_headers) lets `initialize` through, then Starlette refuses the next "
            "preflight (400) and the SDK sees `Failed to fetch`. The stateless server completed without either."),
        sources=(FETCH_CORS, f"{NGINX_HEADERS}#add_header", f"{HAPROXY}#4.2-http-after-response%20set-header",
                 PYTHON_SDK_CORS,
                 "https://github.com/modelcontextprotocol/typescript-sdk#cors-configuration-for-browser-based-clients"),
    ),
    McpScenario(
        name="mcp-held-headers",
        symptom="over HTTP/2 (nginx before 1.23) an MCP client's GET stream gets no 200 until the server's "
                "first notification or keep-alive",
        proxies=("nginx",),
        workload=McpWorkload(sessions=1, calls=1, replicas=1),
        # nginx over TLS with HTTP/2 (the http2 chat scenarios' listener); the origin's keep-alive,
        # the GET stream's first body byte, scaled from the SDK's 15 s.
        broken=McpVariant(proxy={"nginx": {"tls_http2": True}}, origin={"keepalive_s": HELD_SILENCE_S},
                          client=OVER_H2),
        fixes=(
            McpFix("open-comment", McpVariant(origin={"open_comment": True}), ("nginx",),
                   (streams.get_headers_prompt(HELD_SILENCE_S, opened_with_comment=True), checks.sessions_complete()),
                   "the server writes an SSE comment right after the headers of every SSE response "
                   "(`--open-comment`, server/mcp/opening.py)"),
        ),
        symptom_checks=(streams.get_headers_held(HELD_SILENCE_S), checks.sessions_complete()),
        explanation=(
            "The standalone GET stream carries only the server's own notifications, and the Python SDK "
            "sends it no byte before the first one or its first keep-alive (15 s): it primes only "
            "resumable POST streams. nginx before 1.23 holds an HTTP/2 response's HEADERS frame until "
            "its first DATA frame (`nginx-http2-headers`), so a client that opens the GET once its "
            "handshake is answered waits up to 15 s for the 200 (forever with keep-alives off), and one "
            "that times out on headers gives up on a healthy stream (go-sdk#937). Any other frame nginx "
            "writes on the same connection lets the held headers go: the official Python client opens its "
            "GET together with the `initialized` POST, whose 202 flushes them, so its session is not "
            "hurt. The fix on the server: an SSE comment right after the headers, which every SSE parser "
            "ignores; on the proxy: nginx 1.23 or later."),
        finding=(
            "Measured here (`python -m labs run mcp-held-headers --proxy-version oldest`, and on the "
            "current release; one replica on mcp 2.3, its keep-alive at 2 s): through nginx 1.22.1 over "
            "HTTP/2 the lone GET's 200 came after 2,009 ms, with its first body byte (15,003 ms with the SDK's "
            "15 s keep-alive, none within 10 s with keep-alives off); with `--open-comment` after 3 ms. nginx "
            "1.30.6: 2 ms either way. The official client's own GET got its 200 1-5 ms after the origin sent "
            "it in every run (8), its session unharmed: the 202 of its `initialized` POST on the same "
            "connection took the held headers along (a GET sent after that 202: 2,022 ms; with it: 19 ms). "
            "Envoy 1.40, Caddy 2.11.4 and 2.6.2, HAProxy 3.2.26 and 2.6.12 and Traefik 3.7 forwarded the "
            "headers in 2-6 ms over HTTP/2: the lead's hold did not reproduce with this origin."),
        since=(HEADERS_FLUSHED,),  # the chat scenario's nginx-http2-headers: the same change
        sources=(V2_DOCS, "https://github.com/modelcontextprotocol/go-sdk/issues/937", FLUSH_COMMIT, SSE_PARSING),
    ),
)
