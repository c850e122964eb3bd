"""App- and gateway-layer scenarios: the Node or Python app (or AI gateway) between the browser
and the model spoils a stream every proxy passes. Each runs the real component (proxies/apps)."""
from __future__ import annotations

from labs.catalogue.common import NGINX_READ, pings_kept_through, pings_lost_to
from labs.scenario import checks
from labs.catalogue.nginx import DOCS as NGINX_DOCS
from labs.catalogue.server import LONG_ANSWER
from labs.scenario.model import Scaled, Scenario, Variant, Workload
from proxies.apps.litellm.kind import LITELLM_KEY

COMPRESSION = "https://github.com/expressjs/compression#filter-1"
COMPRESSIBLE = "https://github.com/jshttp/compressible"
NEXT_COMPRESS = "https://nextjs.org/docs/app/api-reference/config/next-config-js/compress"
NEXT_REWRITES = "https://nextjs.org/docs/app/api-reference/config/next-config-js/rewrites"
WEBPACK_COMPRESS = "https://webpack.js.org/configuration/dev-server/#devservercompress"
WEBPACK_PROXY = "https://webpack.js.org/configuration/dev-server/#devserverproxy"
NO_TRANSFORM = "https://github.com/expressjs/compression#cache-control-no-transform"
ABORT = "https://nodejs.org/api/globals.html#class-abortcontroller"
PROXY_INTERCEPT = "https://github.com/chimurai/http-proxy-middleware#intercept-and-manipulate-responses"
PROXY_RECIPES = "https://github.com/chimurai/http-proxy-middleware/blob/master/recipes/response-interceptor.md"
GUNICORN = "https://docs.gunicorn.org/en/stable/design.html#sync-workers"
LITELLM = "https://docs.litellm.ai/docs/proxy/config_settings"
JUPYTER_PROXY = "https://github.com/jupyterhub/jupyter-server-proxy/blob/main/jupyter_server_proxy/handlers.py"
OPENAI_HEADERS = "https://github.com/openai/openai-python/blob/main/src/openai/_base_client.py"
# jupyter-proxy-accept: what the OpenAI Python SDK sends on every request, streaming or not.
SDK_ACCEPT = {"Accept": "application/json"}
DJANGO_STREAMING = "https://docs.djangoproject.com/en/5.2/ref/request-response/#streaminghttpresponse-objects"
DJANGO_ASYNC = "https://docs.djangoproject.com/en/5.2/topics/async/"
# django-stream-iterator: what Django logs when it consumes an iterator of the other kind whole.
DJANGO_WARNING = "StreamingHttpResponse must consume synchronous iterators"

GUNICORN_TIMEOUT_S = 3  # gunicorn-sync-timeout: the broken --timeout (its stress checks too)
GATEWAY_IDLE_TIMEOUT_S = 2.0  # litellm-heartbeats: nginx's proxy_read_timeout in front of LiteLLM
SERVER_PING_S = 0.25  # the model server's heartbeat, which LiteLLM drops
# LiteLLM's keep-alive in the fix: 1 s is its floor (it raises anything shorter to 1 s, measured:
# 0.25 s gave one ping a second), so nginx's timeout above is twice that.
GATEWAY_PING_S = 1.0

SCENARIOS = [
    Scenario(
        name="express-compression",
        layer="app",
        kind="compression-delay",
        symptom="the Node backend streams with curl, and the browser gets the answer in one lump",
        path=("express",),
        workload=Workload(),
        broken=Variant(),  # app.use(compression()), as the middleware's README shows it
        fix=Variant(proxy={"express": {"compression": "skip-sse"}}),
        symptom_checks=(checks.content_encoded("gzip"), checks.held_to_end(),
                        checks.finding("compression-delay")),
        cure_checks=(checks.content_encoded(None), checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("compression-delay")),
        explanation=(
            "`app.use(compression())` compresses every response whose type `compressible` knows, and "
            "it knows text/event-stream. The gzip stream is flushed only when zlib's buffer fills or "
            "the response ends, so a client that accepts gzip (every browser, httpx, the OpenAI SDK) "
            "gets the whole answer in one read at the end; curl without --compressed streams, which "
            "hides the bug. Leave text/event-stream out with a `filter` (or call `res.flush()` after "
            "each write, which compression adds, or answer with `Cache-Control: no-transform`)."),
        fix_summary="compression({ filter }) with a filter that returns false for text/event-stream",
        finding=(
            "Measured here (Express 5.3, compression 1.8.2, Node 20.20, 20 events at 10 tok/s, a gzip "
            "client): TTFT 2,017-2,025 ms with all 21 events in one read; with the filter TTFT ~12-54 ms, "
            "one read per event; `res.flush()` per chunk keeps gzip and streams too (TTFT ~26 ms, 21 "
            "reads). Node sets TCP_NODELAY on every socket, so no Nagle delay hides behind this."),
        sources=(COMPRESSION, COMPRESSIBLE),
    ),
    Scenario(
        name="express-proxy-abort",
        layer="app",
        kind="disconnect-not-propagated",
        symptom="users who closed the tab still cost GPU time behind the Node backend",
        path=("express",),
        workload=Workload(tokens_per_s=20.0, disconnect_after_events=3, script=LONG_ANSWER),
        broken=Variant(proxy={"express": {"compression": "off", "abort_on_close": False}}),
        fix=Variant(proxy={"express": {"abort_on_close": True}}),
        symptom_checks=(checks.departed(), checks.tokens_for_nobody_at_least(0.5), checks.release_at_least(10),
                        checks.finding("disconnect-not-propagated")),
        cure_checks=(checks.departed(), checks.server_heard_departures(), checks.release_within(4),
                     checks.no_finding("disconnect-not-propagated")),
        server_metrics=("streamlab_tokens_generated_total", "streamlab_tokens_after_disconnect_total",
                        'streamlab_requests_aborted_total{reason="disconnect"}'),
        explanation=(
            "A backend that forwards with `fetch` and copies `for await (const chunk of upstream.body) "
            "res.write(chunk)` never tells the upstream that the client left: after the close, "
            "`res.write` just returns false and the loop reads on, so the model server generates the "
            "whole answer for nobody and holds its slot. Give the fetch an AbortController's signal "
            "and abort it when the response closes: the upstream connection closes and a server that "
            "handles disconnects stops within a decode step."),
        fix_summary="res.on('close', () => ac.abort()), with `signal: ac.signal` on the upstream fetch",
        finding=(
            "Measured here (Express 5.3, Node 20.20's fetch): the client leaves after 3 of 65 tokens at "
            "20 tok/s; without the abort the server generated 62 tokens for nobody and stayed busy "
            "3.1 s after the departure; with it the server counted the disconnect and was idle 17 ms "
            "after it. `http-proxy-middleware` (3.0.11) with its defaults, measured the same way, "
            "passes the departure on: the server counted the disconnect, idle 18 ms after it."),
        sources=(ABORT, "https://expressjs.com/en/api.html#res"),
    ),
    Scenario(
        name="proxy-response-hook",
        layer="app",
        kind="buffering",
        symptom="since the Node proxy started logging token usage, answers arrive all at once",
        path=("express",),
        workload=Workload(),
        # http-proxy-middleware with a responseInterceptor, as its README's recipe writes it; no
        # compression middleware, so the hook alone holds the stream.
        broken=Variant(proxy={"express": {"forward": "response-hook", "compression": "off"}}),
        fix=Variant(proxy={"express": {"forward": "hook-skip-sse"}}),
        symptom_checks=(checks.content_encoded(None), checks.held_to_end(),
                        checks.framed_as("content-length", "the hook was handed the whole body"),
                        checks.finding("buffering")),
        cure_checks=(checks.streamed(), checks.framed_as("chunked", "piped as it came"),
                     checks.complete_with_done(), checks.text_is_script(),
                     checks.no_finding("buffering")),
        explanation=(
            "A response hook in a proxy is handed the body, so the proxy must read the body first: "
            "http-proxy-middleware's `responseInterceptor` (with `selfHandleResponse: true`, as its "
            "recipes for rewriting, logging or accounting a response show it) collects every chunk "
            "until the upstream's answer ends, then writes it at once with a `Content-Length`. An "
            "event stream through it is a 200 with nothing until the last token, and nothing in "
            "either log says why; its README says it in one line (\"`responseInterceptor` disables "
            "streaming\"). mitmproxy's `response` hook without `flow.response.stream` holds a "
            "body the same way. Skip the hook for event streams: in the `proxyRes` handler, pipe a "
            "`text/event-stream` response to the client (`res.writeHead` with its status and "
            "headers, then `proxyRes.pipe(res)`) and intercept only the rest; or account tokens "
            "from the final `usage` chunk as it passes, not from a buffered body."),
        fix_summary="in `on.proxyRes`: text/event-stream -> `res.writeHead(...)`, `proxyRes.pipe(res)`; "
                    "everything else -> `responseInterceptor(...)`",
        finding=(
            "Measured here (http-proxy-middleware 3.0.11, Express 5.3, Node 20.20, 20 events at "
            "10 tok/s, three runs each): with the interceptor TTFB = TTFT = E2E = 2,007-2,016 ms, all "
            "21 events in one read, framed by `Content-Length: 6000`; skipping it for event "
            "streams TTFT 4-22 ms, one read per event, chunked, while a JSON answer beside it is "
            "still hooked. `createProxyMiddleware` with its defaults streams the same (TTFT 4-8 ms, "
            "21 reads) and passes a departure on (the server counted the disconnect and was idle "
            "18 ms after it)."),
        sources=(PROXY_INTERCEPT, PROXY_RECIPES),
    ),
    Scenario(
        name="nextjs-rewrites",
        layer="app",
        kind="compression-delay",
        symptom="the Next.js site proxies the model API, and answers arrive all at once",
        path=("nextjs",),
        workload=Workload(),
        broken=Variant(),  # rewrites() to the model server, `compress` left at its default (on)
        fix=Variant(proxy={"nextjs": {"compress": False}}),
        symptom_checks=(checks.content_encoded("gzip"), checks.held_to_end(),
                        checks.finding("compression-delay")),
        cure_checks=(checks.content_encoded(None), checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("compression-delay")),
        explanation=(
            "A Next.js site that forwards /v1/* to the model server with `rewrites()` answers through "
            "its own server, and `compress` (on by default) gzips every response, the proxied event "
            "stream included, without flushing per event: a gzip-accepting client (every browser) "
            "gets the answer in one lump at the end. Turn `compress` off (and compress elsewhere, "
            "skipping text/event-stream), or keep the model API off the Next server."),
        fix_summary="next.config.js: `compress: false`",
        finding=(
            "Measured here (Next.js 16.4.6, `next start`, a gzip client, 20 events at 10 tok/s): TTFT "
            "2,018-2,025 ms, 21 events in one read; with `compress: false` TTFT ~20 ms, one read per "
            "event. A route handler that returns `upstream.body` was still gzipped into one lump with "
            "`compress` on (TTFT 2,018 ms) here, so the route alone is no fix. `rewrites()` is "
            "evaluated at `next build`: its destination is baked into the build."),
        sources=(NEXT_COMPRESS, NEXT_REWRITES),
    ),
    Scenario(
        name="dev-proxy-buffering",
        layer="app",
        kind="compression-delay",
        symptom="in production the answer streams; on `npm start` it appears all at once",
        path=("webpack",),
        workload=Workload(),
        broken=Variant(),  # webpack-dev-server with devServer.proxy for /v1, compress at its default
        fix=Variant(proxy={"webpack": {"compress": False}}),
        symptom_checks=(checks.content_encoded("gzip"), checks.held_to_end(),
                        checks.finding("compression-delay")),
        cure_checks=(checks.content_encoded(None), checks.streamed(), checks.complete_with_done(),
                     checks.no_finding("compression-delay")),
        explanation=(
            "webpack-dev-server puts the `compression` middleware in front of everything it "
            "answers (`devServer.compress`, on by default), the responses its `devServer.proxy` "
            "forwards included. `compression` gzips text/event-stream and flushes only when zlib's "
            "buffer fills or the response ends, so in development a browser gets the whole answer "
            "at the end, while production (a proxy that streams, no dev server) streams: the bug "
            "lives only on developers' machines, where it is taken for the model being slow. Turn "
            "`compress` off (the dev server has no need of it on loopback), or have the API answer "
            "with `Cache-Control: no-transform`, which `compression` honours for that response."),
        fix_summary="webpack.config.js: `devServer: { compress: false }`",
        finding=(
            "Measured here (webpack-dev-server 5.2.7, webpack 5.113, its compression 1.8.2, Node "
            "20.20, 20 events at 10 tok/s, a gzip client, three runs each): gzip, TTFT = E2E = "
            "2,007-2,013 ms, 21 events in one read; with `compress: false` TTFT 4-13 ms, one read "
            "per event; with the compression left on and the server answering `Cache-Control: "
            "no-cache, no-transform` (its `no_transform` knob) TTFT 4-6 ms, one read per event, "
            "uncompressed. The server's own header is the fix where the dev config is not yours."),
        sources=(WEBPACK_COMPRESS, WEBPACK_PROXY, NO_TRANSFORM),
    ),
    Scenario(
        name="gunicorn-sync-timeout",
        layer="app",
        kind="total-timeout",
        symptom="long answers from the Flask app stop mid-sentence, with a 200",
        path=("gunicorn",),
        workload=Workload(script=LONG_ANSWER),
        broken=Variant(proxy={"gunicorn": {"worker_class": "sync", "workers": 2,
                                           "timeout_s": GUNICORN_TIMEOUT_S}}),
        fix=Variant(proxy={"gunicorn": {"worker_class": "gthread", "threads": 50}}),
        symptom_checks=(checks.status_is(200), checks.outcome_is("truncated", "reset"),
                        checks.cut_at_deadline(GUNICORN_TIMEOUT_S, "gunicorn's worker --timeout"),
                        checks.hop_said("gunicorn", "WORKER TIMEOUT"),
                        checks.finding("total-timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.outlived(GUNICORN_TIMEOUT_S, "the broken --timeout"),
                     checks.no_finding("total-timeout")),
        explanation=(
            "A sync worker serves one request at a time and tells the arbiter it is alive only "
            "between requests, so a stream longer than `--timeout` (30 s by default) looks like a hung "
            "worker: the arbiter logs WORKER TIMEOUT and kills it mid-answer. The client got a 200 and "
            "an unterminated chunked body; requests, httpx and the OpenAI SDK each raise a different "
            "error. With two sync workers, ten concurrent streams also start in waves of two. A "
            "threaded (gthread) or async (gevent) worker keeps the heartbeat going while it streams."),
        fix_summary="gunicorn --worker-class gthread --threads 50 (or -k gevent: pip install 'gunicorn[gevent]')",
        finding=(
            "Measured here (gunicorn 27, Flask 3.1, a generator over requests' `iter_content`): with "
            "`--timeout 3` the 6 s answer was cut at 3-4 s (the arbiter checks about once a second) with "
            "the 200 already sent; with gthread the same answer completed. Ten 2 s streams at once "
            "through two sync workers (`--timeout 30`) got their first token at 0.05, 0.11, 2.07, 2.11, "
            "4.08, 4.12, 6.09, 6.13, 8.10 and 8.14 s: waves of two; through gthread, eight at once "
            "(within 60 ms) and two at ~2 s, which were the model server's own 8 slots."),
        scaled=(Scaled("gunicorn --timeout", f"{GUNICORN_TIMEOUT_S}s", "30s (gunicorn's default)"),
                Scaled("long answer", "60 tokens at 10 tok/s (6 s)", "minutes of reasoning")),
        sources=(GUNICORN, "https://docs.gunicorn.org/en/stable/settings.html#timeout"),
    ),
    Scenario(
        name="django-stream-iterator",
        layer="app",
        kind="buffering",
        symptom="the Django view streamed under gunicorn; since the move to uvicorn the answer "
                "arrives in one lump",
        path=("django",),
        workload=Workload(),
        broken=Variant(),  # a sync view returning a generator over requests, served under ASGI
        fix=Variant(proxy={"django": {"iterator": "async"}}),
        symptom_checks=(checks.held_to_end(), checks.hop_said("django", DJANGO_WARNING),
                        checks.finding("buffering")),
        cure_checks=(checks.streamed(), checks.complete_with_done(), checks.text_is_script(),
                     checks.no_finding("buffering")),
        explanation=(
            "Django's `StreamingHttpResponse` takes a synchronous or an asynchronous iterator, and "
            "each server kind iterates only one: under ASGI (uvicorn, daphne, hypercorn) Django "
            "serves a synchronous iterator by running `list()` over it in a thread first, under WSGI "
            "(gunicorn, runserver) an asynchronous one by collecting it with `async_to_sync`. Either "
            "way the headers go at once and the body only when the upstream's answer is complete; "
            "the only trace is a `Warning` line in the log. A view that streams from `requests` "
            "works under gunicorn and lumps under uvicorn. Match the iterator to the server: an "
            "async generator (httpx.AsyncClient, the OpenAI SDK's AsyncOpenAI) under ASGI, a plain "
            "generator under WSGI."),
        fix_summary="under ASGI: `async def` view returning `StreamingHttpResponse(async_gen())` "
                    "(an async generator over httpx.AsyncClient's `aiter_raw()`)",
        finding=(
            "Measured here (Django 5.2.19, uvicorn 0.55, gunicorn 27 gthread, 20 events at 10 tok/s): the "
            "sync generator under uvicorn sent its 23 writes within 2 ms of each other at 2.1-2.4 s "
            "(TTFT = E2E) and logged \"StreamingHttpResponse must consume synchronous iterators in "
            "order to serve them asynchronously\"; the async generator under uvicorn streamed (first "
            "event 0.36-0.63 s, the first request's imports included, last at 2.3-2.5 s); under "
            "gunicorn the sync generator streamed and the async one was held whole (2.2-2.5 s, the "
            "mirror warning)."),
        sources=(DJANGO_STREAMING, DJANGO_ASYNC),
    ),
    Scenario(
        name="jupyter-proxy-accept",
        layer="app",
        kind="buffering",
        symptom="the model server streams in the notebook's terminal (curl), and the OpenAI SDK "
                "through the notebook's /proxy/ URL gets each answer at once",
        path=("jupyter",),
        workload=Workload(),
        broken=Variant(client={"headers": SDK_ACCEPT}),
        fix=Variant(client={"headers": {"Accept": "text/event-stream"}}),
        symptom_checks=(checks.held_to_end(),
                        checks.framed_as("content-length", "the proxy read the answer whole"),
                        checks.finding("buffering")),
        cure_checks=(checks.streamed(), checks.framed_as("chunked", "flushed as it came"),
                     checks.complete_with_done(), checks.text_is_script(), checks.no_finding("buffering")),
        explanation=(
            "jupyter-server-proxy (Jupyter's /proxy/PORT/ URLs, JupyterHub's and SageMaker's way to "
            "a model server started beside a notebook) has two ways to forward an answer: "
            "progressive, flushing each chunk as Tornado's client reads it, and buffered, reading "
            "the whole answer and sending it with a Content-Length. It picks progressive only when "
            "the request's `Accept` header is exactly `text/event-stream`. The OpenAI Python SDK "
            "sends `Accept: application/json` on every request, streaming ones too (httpx and "
            "requests send `*/*`), so its stream is held to the end, while curl or a browser's "
            "EventSource (which send that exact value) stream. Send the header: `extra_headers="
            "{\"Accept\": \"text/event-stream\"}` on the call, or `default_headers` on the client."),
        fix_summary="the client sends exactly `Accept: text/event-stream` (OpenAI SDK: "
                    "`default_headers={\"Accept\": \"text/event-stream\"}`)",
        finding=(
            "Measured here (Jupyter Server 2.21.1, jupyter-server-proxy 4.6.0, Tornado 6.6.1, 20 "
            "events at 10 tok/s, the lab's client sending each Accept value twice): `text/event-stream` "
            "TTFT 6 ms, one read per event, chunked; `application/json`, `*/*` and `text/event-stream, "
            "application/json` TTFT = E2E = 2,005-2,009 ms, one read, `Content-Length: 6000`. The "
            "issue's lead (a close-delimited upstream answer read to its end) is not what holds it: "
            "see the field notes."),
        sources=(JUPYTER_PROXY, OPENAI_HEADERS),
    ),
    Scenario(
        name="litellm-heartbeats",
        layer="gateway",
        kind="idle-timeout",
        symptom="behind the AI gateway, answers that pause to think are cut, though the model sends pings",
        path=("nginx", "litellm"),
        base="fixed",
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 4.0, "heartbeat_s": SERVER_PING_S},
                          client={"headers": {"Authorization": f"Bearer {LITELLM_KEY}"}}),
        broken=Variant(proxy={"nginx": {"proxy_read_timeout": GATEWAY_IDLE_TIMEOUT_S}}),
        fix=Variant(proxy={"litellm": {"keepalive_ping_s": GATEWAY_PING_S}}),
        symptom_checks=(checks.outcome_is("truncated"), *pings_lost_to(GATEWAY_IDLE_TIMEOUT_S, NGINX_READ)),
        cure_checks=pings_kept_through(GATEWAY_IDLE_TIMEOUT_S, NGINX_READ),
        server_metrics=("streamlab_heartbeats_total",),
        explanation=(
            "The model server sends `: ping` comments while the model is silent, so every idle "
            "timeout between it and the client is reset. An AI gateway that parses the stream and "
            "re-emits it (LiteLLM re-serialises each chunk) drops the comments: the silence reaches "
            "every hop in front of the gateway whole, and a proxy's idle timeout there cuts the "
            "stream. Have the gateway send its own keep-alive pings."),
        fix_summary=f"litellm_settings: {{sse_keepalive_ping_interval_seconds: {GATEWAY_PING_S:g}}}",
        finding=(
            "Measured here (LiteLLM proxy 1.108.7, offline: local cost map, a local master key): a 4 s "
            "pause with the server pinging every 0.25 s reached the client as 4 s without a byte. "
            "LiteLLM's mid-stream keep-alive never pings more often than once a second: 0.25 s was "
            "raised to 1 s (its floor), so an idle timeout of 1 s in front of it still cut the stream; "
            "size the timeout above the gateway's interval. "
            "LiteLLM re-emits one event per upstream event, keeps unknown body fields (the `lab` "
            "knobs arrive) and does not compress."),
        scaled=(Scaled("nginx proxy_read_timeout", f"{GATEWAY_IDLE_TIMEOUT_S:g}s", "60s (nginx's default)"),
                Scaled("silence mid-stream", "4s", "a tool call or a long reasoning step")),
        sources=(LITELLM, f"{NGINX_DOCS}#proxy_read_timeout"),
    ),
]
