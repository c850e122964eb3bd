"""Everything a request becomes before its first byte, whatever its protocol: `Service.admit`.

The model name, the prompt (tokenized in a thread when it is long, so the event loop never
stalls), the token budget against the context, the lab knobs, and the engine's admission (429
when full). The routes (server/http/app.py, server/http/api_routes.py) and the fast lane
(server/http/fast_lane.py) parse a request in its protocol (server/apis/) and hand it here.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from server import errors, metrics
from server.apis.base import AdmittedRequest
from server.apis.chat import ChatCompletionRequest
from server.apis.lab import LAB_HEADER, LabOptions, lab_with_header
from server.apis.messages import VERSION_HEADER
from server.apis.response_store import ResponseStore
from server.apis.table import CHAT, MESSAGES, RESPONSES, Api
from server.config import ServerConfig
from server.engine.base import Engine, EngineStopped, GenerationRequest, Pacing, QueueFull, SamplingParams
from server.errors import APIError
from server.http.lab_access import LabAccess
from server.stream.completion_job import CompletionJob, CompletionText
from server.text.detokenizer import Vocabulary
from server.text.prompts import PromptEncoder
from server.text.stops import stop_handler

log = logging.getLogger("server.app")

# Parsing or tokenizing more than this goes to a thread: ~1 MB of JSON or text takes milliseconds,
# long enough to stall every other stream's next token.
OFF_LOOP_BYTES = 256 * 1024
DEFAULT_CONTEXT = 2048
# Unique completion ids without a uuid4 (a getrandom syscall) per request: a random part per
# process, then a counter; each protocol's own prefix (chatcmpl-, resp_, msg_).
_ID_RANDOM = secrets.token_hex(8)
COMPLETION_IDS = (f"{CHAT.id_prefix}{_ID_RANDOM}{n:016x}" for n in itertools.count())
_OTHER_IDS = itertools.count()


def new_id(api: Api) -> str:
    if api is CHAT:
        return next(COMPLETION_IDS)
    return f"{api.id_prefix}{_ID_RANDOM}{next(_OTHER_IDS):016x}"


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
        self.context_length = (context_length or config.context_length
                               or model_context_length(config.model, tokenizer))
        # No token covers more characters than the longest one in the vocabulary, so a text
        # longer than context x this cannot fit: refused before it is tokenized (an 8 MB prompt
        # took seconds of CPU and ~1 GB to learn that).
        self.max_token_chars = longest_token_chars(tokenizer)
        self.lab_access = LabAccess.for_server(config.lab_enabled, config.lab_token, config.host)
        self.fingerprint = f"fp_streamlab_{engine.name}"
        self.responses = ResponseStore(config.responses_window_s)  # GET /v1/responses/{id}
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

    def check_lab(self, request: AdmittedRequest, presented: str | None,
                  lab_header: str | None = None) -> None:
        """Who may use lab knobs (`presented`: the lab token), for the body's `lab` field and
        the `X-Streamlab-Lab` header alike; the header's knobs merged under the body's."""
        if lab_header is not None:
            self.lab_access.check(presented, f"the {LAB_HEADER} header", param=LAB_HEADER)
        if request.lab is not None:
            self.lab_access.check(presented, "the `lab` request field", param="lab")
        request.lab = lab_with_header(request.lab, lab_header)

    async def parse(self, body: bytes, schema: Any = ChatCompletionRequest) -> Any:
        """The body as the protocol's request (`schema`: its row's `request`), or a 400."""
        try:
            if len(body) > OFF_LOOP_BYTES:
                return await asyncio.to_thread(schema.model_validate_json, body)
            return schema.model_validate_json(body)
        except ValidationError as exc:
            raise errors.from_validation_errors(exc.errors()) from None

    async def accept(self, api: Api, body: bytes, token: str | None, arrived_at: float,
                     receive: Any, versioned: bool = False,
                     lab_header: str | None = None) -> tuple[Any, CompletionJob]:
        """A body parsed in its protocol, checked and admitted, for the ASGI routes and the lane
        alike (APIError, ClientLeft). `versioned`: the request carries `anthropic-version`;
        `lab_header`: its `X-Streamlab-Lab`."""
        if api is MESSAGES and not versioned:
            raise APIError(400, f"{VERSION_HEADER}: header is required")
        parsed = await self.parse(body, api.request)
        self.check_lab(parsed, token, lab_header)
        response_id = created = keep = None
        if api is RESPONSES and parsed.store:
            response_id, created = new_id(api), int(time.time())
            keep = self.responses.add(response_id, parsed, created, len(body)).keep
        return parsed, await self.admit(parsed, arrived_at, receive, api, response_id, created, keep)

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

    async def admit(self, request: AdmittedRequest, arrived_at: float, receive: Any = None,
                    api: Api = CHAT, completion_id: str | None = None, created: int | None = None,
                    keep: Any = None) -> CompletionJob:
        """The request admitted to the engine, as a job for its reply; `completion_id` and
        `created` given: a stored response regenerated (server/apis/response_store.py)."""
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
        metrics.count_api_request(api.name, request.stream)
        return CompletionJob(
            generation=generation, text=text, settings=settings,
            completion_id=completion_id or new_id(api),
            created=int(time.time()) if created is None else created,
            model=request.model, system_fingerprint=self.fingerprint, arrived_at=arrived_at,
            wire=api.wire, include_usage=request.include_usage, stamp=lab.stamp,
            pad_bytes=lab.pad_bytes, error_after_tokens=lab.error_after_tokens,
            abort_after_tokens=lab.abort_after_tokens, send_timeout_s=config.send_timeout_s,
            prompt_tokens=len(prompt_ids), keep=keep)

    async def _tokenize(self, request: AdmittedRequest,
                        lab: LabOptions) -> tuple[list[int], list[int] | None]:
        messages = request.prompt_messages()
        where = request.prompt_param
        if len(messages) > self.context_length:
            # Every message costs at least one token of the template (its role marker).
            raise APIError(400, f"{len(messages)} messages cannot fit in the model's "
                           f"context of {self.context_length} tokens", param=where,
                           code="context_length_exceeded")
        fits = self.context_length * self.max_token_chars
        prompt_chars = sum(len(m["content"]) for m in messages)
        if prompt_chars > fits:
            raise APIError(400, f"the prompt is {prompt_chars} characters: more than the model's "
                           f"context of {self.context_length} tokens can hold", param=where,
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

    def _token_budget(self, request: AdmittedRequest, prompt_tokens: int,
                      forced_ids: list[int] | None) -> int:
        room = self.context_length - prompt_tokens
        if room < 1:
            raise APIError(400, f"the prompt is {prompt_tokens} tokens: the model's context is "
                           f"{self.context_length}", param=request.prompt_param,
                           code="context_length_exceeded")
        asked = request.requested_max_tokens
        name = request.max_tokens_param
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


def error_reply(api: Api, error: APIError) -> JSONResponse:
    """An error before the first byte in the protocol's status and shape (chat's and Responses':
    `APIError.response()`'s; Messages': Anthropic's)."""
    status, body = api.http_error(error)
    return JSONResponse(body, status_code=status, headers=error.headers)
