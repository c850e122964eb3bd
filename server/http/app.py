"""The FastAPI app: thin routes that validate, admit, and choose a JSON reply or a stream.

    app = create_app(config, engine, tokenizer)     # engine not started: the lifespan starts it
    asgi = wrap_middleware(app, config)             # body limit (+ the gzip failure mode)

Everything a request becomes before its first byte lives in `Service.admit`: the model name,
the prompt (tokenized in a thread when it is long, so the event loop never stalls), the token
budget against the context, the lab knobs, and the engine's admission (429 when full).
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
import itertools
import secrets
from pathlib import Path
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import ValidationError
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from server import errors, metrics
from server.config import ServerConfig
from server.engine.base import (
    Engine,
    EngineStopped,
    GenerationRequest,
    Pacing,
    QueueFull,
    SamplingParams,
)
from server.errors import APIError
from server.http import event_source, records
from server.http.lab_access import TOKEN_HEADER, LabAccess, LabGuard
from server.http.middleware import BodySizeLimit, RequestChecks, gzip_everything
from server.http.schema import ChatCompletionRequest, LabOptions
from server.stream.completion_job import CompletionJob, CompletionText
from server.stream.json_reply import JSONCompletion
from server.stream.sse_writer import SSECompletion
from server.text.detokenizer import Vocabulary
from server.text.prompts import PromptEncoder
from server.text.stops import stop_handler

log = logging.getLogger("server.app")

# Parsing or tokenizing more than this goes to a thread: ~1 MB of JSON or text takes milliseconds,
# long enough to stall every other stream's next token.
OFF_LOOP_BYTES = 256 * 1024
DEFAULT_CONTEXT = 2048
# How often the app checks that the engine still runs (it exits when it does not).
ENGINE_WATCH_S = 0.25
# Unique completion ids without a uuid4 (a getrandom syscall) per request: a random prefix per
# process, then a counter.
_ID_PREFIX = f"chatcmpl-{secrets.token_hex(8)}"
COMPLETION_IDS = (f"{_ID_PREFIX}{n:016x}" for n in itertools.count())


# (FastAPI >= 0.16x has it; older releases take no such argument and have no such cost.)
NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}
    if "telemetry" in inspect.signature(FastAPI).parameters else {})


class ClientLeft(Exception):
    """The client went away before anything was sent (counted where it was noticed)."""


class Service:
    """What the routes need: config, engine, tokenizer, and the per-server preparations."""

    def __init__(self, config: ServerConfig, engine: Engine, tokenizer: Any,
                 eos_token_ids: frozenset[int] = frozenset(),
                 context_length: int | None = None) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self.vocabulary = Vocabulary.from_tokenizer(tokenizer)
        self.prompts = PromptEncoder(tokenizer)
        # Read on every request: computed once (it looks at the disk).
        self.model_name = config.model_name
        self.model_names = frozenset((self.model_name, config.model))
        self.eos_token_ids = eos_token_ids
        self.context_length = context_length or model_context_length(config.model, tokenizer)
        # No token covers more characters than the longest one in the vocabulary, so a text
        # longer than context x this cannot fit: refused before it is tokenized (an 8 MB prompt
        # took seconds of CPU and ~1 GB to learn that).
        self.max_token_chars = longest_token_chars(tokenizer)
        self.lab_access = LabAccess.for_server(config.lab_enabled, config.lab_token, config.host)
        self.fingerprint = f"fp_streamlab_{engine.name}"
        self.started = int(time.time())

    # -- before the first byte ---------------------------------------------------------------

    async def read_body(self, request: Request) -> bytes:
        """The whole body within --body-timeout-s (408 after it: a trickled or short body)."""
        try:
            async with asyncio.timeout(self.config.body_timeout_s):  # no task, unlike wait_for
                return await request.body()
        except TimeoutError:
            raise APIError(408, f"the request body did not arrive within "
                           f"{self.config.body_timeout_s:g} s", code="request_timeout",
                           headers={"Connection": "close"}) from None

    def check_lab(self, request: ChatCompletionRequest, presented: str | None) -> None:
        if request.lab is not None:
            self.lab_access.check(presented, "the `lab` request field", param="lab")

    async def parse(self, body: bytes) -> ChatCompletionRequest:
        try:
            if len(body) > OFF_LOOP_BYTES:
                return await asyncio.to_thread(ChatCompletionRequest.model_validate_json, body)
            return ChatCompletionRequest.model_validate_json(body)
        except ValidationError as exc:
            raise errors.from_validation_errors(exc.errors()) from None

    @staticmethod
    async def _left_during(delay_s: float, receive: Any) -> bool:
        """Wait `delay_s` (the lab's silence before headers); True if the client left meanwhile."""
        if receive is None:
            await asyncio.sleep(delay_s)  # pacing: the lab's silence before headers
            return False

        async def departure() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
        watcher = asyncio.ensure_future(departure())
        try:
            await asyncio.wait_for(asyncio.shield(watcher), delay_s)  # pacing: the lab's silence
        except asyncio.TimeoutError:
            return False
        finally:
            watcher.cancel()
        return True

    async def admit(self, request: ChatCompletionRequest, arrived_at: float,
                    receive: Any = None) -> CompletionJob:
        config = self.config
        if request.model not in self.model_names:  # config.accepts_model, without the disk
            raise APIError(404, f"the model {request.model!r} does not exist: this server serves "
                           f"{self.model_name!r}", param="model", code="model_not_found")
        lab = request.lab or LabOptions()
        settings = config.stream.merged(lab.stream_overrides())
        prompt_ids, forced_ids = await self._tokenize(request, lab)
        max_new_tokens = self._token_budget(request, len(prompt_ids), forced_ids)
        generation_request = GenerationRequest(
            prompt_ids=prompt_ids,
            max_new_tokens=max_new_tokens,
            sampling=SamplingParams(
                temperature=1.0 if request.temperature is None else request.temperature,
                top_p=1.0 if request.top_p is None else request.top_p,
                seed=request.seed),
            pacing=Pacing(tokens_per_s=lab.tokens_per_s,
                          first_token_delay_s=lab.first_token_delay_s,
                          pause_after_tokens=lab.pause_after_tokens, pause_s=lab.pause_s),
            forced_ids=forced_ids,
            eos_token_ids=self.eos_token_ids)
        if lab.headers_delay_s and await self._left_during(lab.headers_delay_s, receive):
            # Nothing was admitted or sent: an abandoned request, never a 200.
            metrics.REQUESTS_ABORTED.labels(reason="disconnect").inc()
            metrics.REQUESTS.labels(status=errors.CLIENT_CLOSED).inc()
            raise ClientLeft()
        try:
            generation = self.engine.submit(generation_request)
        except QueueFull as exc:
            raise APIError(429, str(exc), type=errors.OVERLOADED, code="queue_full",
                           headers={"Retry-After": str(max(1, round(exc.retry_after_s)))}) from None
        except EngineStopped as exc:
            raise APIError(503, f"the engine is not running: {exc}", type=errors.SERVER_ERROR,
                           code="engine_unavailable") from None
        text = CompletionText(self.vocabulary.detokenizer(settings.detokenizer),
                              stop_handler(request.stop_sequences, settings.stop_holdback))
        return CompletionJob(
            generation=generation, text=text, settings=settings,
            completion_id=next(COMPLETION_IDS), created=int(time.time()),
            model=request.model, system_fingerprint=self.fingerprint, arrived_at=arrived_at,
            include_usage=request.include_usage, stamp=lab.stamp, pad_bytes=lab.pad_bytes,
            error_after_tokens=lab.error_after_tokens, abort_after_tokens=lab.abort_after_tokens,
            send_timeout_s=config.send_timeout_s)

    async def _tokenize(self, request: ChatCompletionRequest,
                        lab: LabOptions) -> tuple[list[int], list[int] | None]:
        if len(request.messages) > self.context_length:
            # Every message costs at least one token of the template (its role marker).
            raise APIError(400, f"{len(request.messages)} messages cannot fit in the model's "
                           f"context of {self.context_length} tokens", param="messages",
                           code="context_length_exceeded")
        messages = [{"role": m.role, "content": m.text()} for m in request.messages]
        fits = self.context_length * self.max_token_chars
        prompt_chars = sum(len(m["content"]) for m in messages)
        if prompt_chars > fits:
            raise APIError(400, f"the prompt is {prompt_chars} characters: more than the model's "
                           f"context of {self.context_length} tokens can hold", param="messages",
                           code="context_length_exceeded")
        if lab.script is not None and len(lab.script) > fits:
            raise APIError(400, f"lab.script is {len(lab.script)} characters: more than the "
                           f"model's context of {self.context_length} tokens can hold",
                           param="lab.script", code="context_length_exceeded")
        size = prompt_chars + len(lab.script or "")
        if size > OFF_LOOP_BYTES:
            return await asyncio.to_thread(self._tokenize_now, messages, lab.script)
        return self._tokenize_now(messages, lab.script)

    def _tokenize_now(self, messages: list[dict[str, str]],
                      script: str | None) -> tuple[list[int], list[int] | None]:
        return self.prompts.encode(messages, script)

    def _token_budget(self, request: ChatCompletionRequest, prompt_tokens: int,
                      forced_ids: list[int] | None) -> int:
        room = self.context_length - prompt_tokens
        if room < 1:
            raise APIError(400, f"the prompt is {prompt_tokens} tokens: the model's context is "
                           f"{self.context_length}", param="messages", code="context_length_exceeded")
        asked = request.requested_max_tokens
        name = "max_completion_tokens" if request.max_completion_tokens is not None else "max_tokens"
        if asked is None:
            return min(room, len(forced_ids)) if forced_ids is not None else room
        if asked > room:
            raise APIError(400, f"{name} is {asked}, but the prompt ({prompt_tokens} tokens) leaves "
                           f"room for {room} in the model's context of {self.context_length}",
                           param=name, code="context_length_exceeded")
        return asked


def longest_token_chars(tokenizer: Any) -> int:
    """The most characters one token of this vocabulary can stand for (at least 1)."""
    with contextlib.suppress(Exception):
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        # Byte-level BPE shows a token as one character per byte: an upper bound on its text.
        return max([1, *(len(piece) for piece in pieces if isinstance(piece, str))])
    return 64  # an unknown tokenizer: a generous bound, still far below an 8 MB prompt


def model_context_length(model: str, tokenizer: Any) -> int:
    """The model's context: config.json's max_position_embeddings, else the tokenizer's idea."""
    config_path = Path(model) / "config.json"
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(config_path.read_text(encoding="utf-8")).get("max_position_embeddings")
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    # transformers reports "no limit" as a huge sentinel (1e30).
    return value if isinstance(value, int) and 0 < value < 10_000_000 else DEFAULT_CONTEXT


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
        service.check_lab(parsed, request.headers.get(TOKEN_HEADER))
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
                                   methods=["GET"])]
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
                             allow_headers=["content-type", "authorization", TOKEN_HEADER.lower(),
                                            event_source.LAST_EVENT_ID],
                             max_age=600)
    return app
