"""The FastAPI app: thin routes that validate, admit, and choose a JSON reply or a stream.

    app = create_app(config, engine, tokenizer)     # engine not started: the lifespan starts it
    asgi = wrap_middleware(app, config)             # body limit (+ the gzip failure mode)

Everything a request becomes before its first byte lives in `Service.admit`
(server/http/service.py); the routes of the other protocols in server/http/api_routes.py.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from server import errors, metrics
from server.apis.chat import ChatCompletionRequest
from server.apis.lab import LAB_HEADER
from server.apis.messages import KEY_HEADER, VERSION_HEADER
from server.config import ServerConfig
from server.engine.base import Engine
from server.http import event_source, records
from server.http.api_routes import api_routes
from server.http.lab_access import TOKEN_HEADER, LabGuard
from server.http.middleware import BodySizeLimit, RequestChecks, gzip_everything
from server.http.service import ClientLeft, Service
from server.stream.json_reply import JSONCompletion
from server.stream.sse_writer import SSECompletion

log = logging.getLogger("server.app")

# How often the app checks that the engine still runs (it exits when it does not).
ENGINE_WATCH_S = 0.25

# (FastAPI >= 0.16x has it; older releases take no such argument and have no such cost.)
NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}
    if "telemetry" in inspect.signature(FastAPI).parameters else {})


def create_app(config: ServerConfig, engine: Engine, tokenizer: Any,
               eos_token_ids: frozenset[int] = frozenset()) -> FastAPI:
    service = Service(config, engine, tokenizer, eos_token_ids)

    async def watch_engine(app: FastAPI) -> None:
        """A dead decode loop must not leave a live process answering 503 for ever: say so,
        and stop the server (main() then exits non-zero) so that a supervisor restarts it."""
        while engine.healthy:
            await asyncio.sleep(ENGINE_WATCH_S)  # poll interval
        app.state.engine_died = True
        log.error("the engine stopped running: /healthz fails and the server exits")
        app.state.on_engine_death()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        watcher = asyncio.ensure_future(watch_engine(app))
        describe = getattr(engine, "describe", None)
        details = describe() if describe else {"engine": engine.name, "slots": engine.slots,
                                               "max_queue": engine.max_queue}
        log.info("serving %r on http://%s:%d (context %d, %s)", config.model_name, config.host,
                 config.port, service.context_length,
                 ", ".join(f"{key}={value}" for key, value in details.items()))
        try:
            yield
        finally:
            watcher.cancel()
            await engine.close()

    # FastAPI's native OpenTelemetry is off: the server has its own metrics, and with it on,
    # every request looked up the global tracer and meter providers (environment reads included,
    # ~2.5% of a request's CPU in a burst of 1,000) to learn that none is configured.
    app = FastAPI(title="streamlab model server", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None, **NO_TELEMETRY)
    app.state.service = service
    app.state.engine_died = False
    # python -m server stops uvicorn here; without it (tests, embedding) the process is told.
    app.state.on_engine_death = lambda: None
    errors.install_error_handlers(app)
    records.install(app)
    app.add_middleware(LabGuard, access=service.lab_access)

    # The chat routes are plain Starlette routes: FastAPI's dependency solving (it parses the
    # query string and headers of every request) cost ~5% of a request's CPU in a burst.
    async def chat_completions(request: Request) -> Response:
        arrived_at = time.monotonic()
        try:
            body = await service.read_body(request)
        except ClientDisconnect:
            # Left mid-upload: nothing to answer, nothing went wrong here. One line, no 500.
            log.info("%s left before its request body was complete",
                     _peer(request.scope))
            metrics.REQUESTS.labels(status=errors.CLIENT_CLOSED).inc()
            return Response(status_code=int(errors.CLIENT_CLOSED))
        parsed = await service.parse(body)
        return await answer(request, parsed, arrived_at)

    async def chat_completions_event_source(request: Request) -> Response:
        """EventSource's form of the POST (server/http/event_source.py)."""
        arrived_at = time.monotonic()
        parsed = await service.parse(event_source.body_from_query(request, config.cors_origins))
        return await answer(request, parsed, arrived_at)

    async def answer(request: Request, parsed: ChatCompletionRequest, arrived_at: float) -> Response:
        """Both forms of the route, once the request is parsed: admit it, then stream or reply."""
        service.check_lab(parsed, request.headers.get(TOKEN_HEADER), request.headers.get(LAB_HEADER))
        try:
            job = await service.admit(parsed, arrived_at, request.receive)
        except ClientLeft:
            log.info("%s left during lab.headers_delay_s", _peer(request.scope))
            return Response(status_code=int(errors.CLIENT_CLOSED))
        return records.track(request, SSECompletion(job, request.headers.get(event_source.LAST_EVENT_ID))
                             if parsed.stream else JSONCompletion(job))

    # First in the route list: FastAPI asks the included router (records) to match on every
    # request before the routes after it, walking its routes' versions each time (~9% of a
    # request's CPU in a burst); the chat routes are matched before it.
    app.router.routes[:0] = [Route("/v1/chat/completions", chat_completions, methods=["POST"]),
                             Route("/v1/chat/completions", chat_completions_event_source,
                                   methods=["GET"]), *api_routes(service)]
    if config.chat_any_path:
        any_path = Route("/{path:path}", chat_completions, methods=["POST"])

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": config.model_name, "object": "model",
                                            "created": service.started, "owned_by": "streamlab"}]}

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        if not engine.healthy:
            return JSONResponse(errors.error_body("the engine is not running", errors.SERVER_ERROR,
                                                  code="engine_unavailable"), status_code=503)
        return JSONResponse({"status": "ok", "engine": engine.name, "model": config.model_name,
                             "slots": engine.slots, "slots_in_use": engine.slots_in_use,
                             "queued": engine.queued})

    @app.get("/health")
    async def health() -> Response:
        """vLLM's liveness probe (benchmark clients such as guidellm call it): 200 with an empty
        body while the engine runs, 503 when it does not."""
        return Response(status_code=200 if engine.healthy else 503)

    @app.get("/metrics")
    async def prometheus_metrics() -> PlainTextResponse:
        return PlainTextResponse(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    if config.chat_any_path:  # last: every other route (/v1/, /lab/...) matches first
        app.router.routes.append(any_path)
    return app


def _peer(scope: Any) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "a client"


def wrap_middleware(app: Any, config: ServerConfig) -> Any:
    """The ASGI app uvicorn runs, outermost first: CORS (only with --cors-origin), the request
    checks (header block, Content-Type), the body limit, then the gzip failure mode if asked."""
    if config.gzip_middleware:
        app = gzip_everything(app, exclude_sse=config.gzip_exclude_sse,
                              sync_flush=config.gzip_sync_flush)
    app = BodySizeLimit(app, config.max_body_bytes)
    app = RequestChecks(app, config.max_header_bytes, config.max_headers)
    if config.cors_origins:
        app = CORSMiddleware(app, allow_origins=list(config.cors_origins),
                             allow_methods=["GET", "POST"],
                             # A page's Messages request carries Anthropic's two headers: without
                             # them here the browser's preflight refused every Messages run.
                             allow_headers=["content-type", "authorization", TOKEN_HEADER.lower(),
                                            LAB_HEADER.lower(), event_source.LAST_EVENT_ID, VERSION_HEADER, KEY_HEADER],
                             max_age=600)
    return app
