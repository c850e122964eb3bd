"""OpenAI-style errors: `{"error": {"message", "type", "param", "code"}}`, never a traceback or HTML.

Before the first byte an error is an HTTP status with this body; after it, the same object travels
in-band as `data: {"error": {...}}` (server/stream/sse.py). `install_error_handlers` makes every way a
request can fail (validation, unknown route, wrong method, a bug) answer in this shape.
"""
from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from server import metrics

log = logging.getLogger("server.errors")

# OpenAI answers 400/404/413 with type "invalid_request_error"; these are the other types used.
SERVER_ERROR = "server_error"
OVERLOADED = "rate_limit_error"
TIMEOUT = "timeout"
# The status counted for a client that left before any response (nginx's convention; never sent).
CLIENT_CLOSED = "499"


class APIError(Exception):
    """An error the client caused or must be told about, with its HTTP status."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


class RequestTooLarge(APIError):
    """413, and the connection closed: the rest of the body is never read, so the connection
    cannot carry another request (reading it to the end would read without the limit, which a
    chunked body has no end to). RFC 9110 section 15.5.14 lets the server close it; the
    announced and the chunked body, the lane and the ASGI route, all answer so."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the server's limit of {limit} bytes",
                         code="request_too_large", headers={"Connection": "close"})


def error_body(message: str, type: str, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# pydantic puts the member of a union it tried into `loc` ("stop", "list[str]"): not a field name.
_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "literal"})


def param_path(loc: tuple[Any, ...]) -> str | None:
    """("body", "messages", 0, "content") -> "messages[0].content"; union member tags dropped."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        text = str(part)
        if text in ("body", "__root__") and not path:
            continue
        if text in _TYPE_TAGS or "[" in text or "(" in text:
            continue
        path = f"{path}.{text}" if path else text
    return path or None


def from_validation_errors(errors: list[dict[str, Any]]) -> APIError:
    """The first validation error as a 400 naming the offending parameter."""
    if not errors:
        return APIError(400, "invalid request")
    first = errors[0]
    # A union reports one error per member ("stop": not a str, list too long): the member that
    # got the right shape but a wrong value says more than "Input should be a valid string".
    same_param = [e for e in errors if param_path(tuple(e.get("loc", ()))) ==
                  param_path(tuple(first.get("loc", ())))]
    first = next((e for e in same_param if not str(e.get("type", "")).endswith("_type")), first)
    if first.get("type") == "json_invalid":
        detail = first.get("ctx", {}).get("error") or first.get("msg", "")
        return APIError(400, f"the request body is not valid JSON: {detail}", code="invalid_json")
    param = param_path(tuple(first.get("loc", ())))
    kind = first.get("type", "")
    if kind == "extra_forbidden":
        message = f"unrecognized request argument supplied: {param}"
    elif kind == "missing":
        message = f"missing required parameter: {param}"
    else:
        # A range check of our own (server/knobs.py) raises ValueError: pydantic prefixes it.
        detail = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        message = f"{param}: {detail}" if param else detail
    return APIError(400, message, param=param, code=kind or None)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        if request.url.path.startswith("/v1/chat"):
            metrics.REQUESTS.labels(status=str(exc.status)).inc()
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _request_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await _api_error(request, from_validation_errors(list(exc.errors())))

    @app.exception_handler(ValidationError)
    async def _validation(request: Request, exc: ValidationError) -> JSONResponse:
        return await _api_error(request, from_validation_errors(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            error = APIError(404, f"no route for {request.method} {request.url.path}", code="not_found")
        elif exc.status_code == 405:
            error = APIError(405, f"method {request.method} is not allowed on {request.url.path}",
                             code="method_not_allowed")
        else:
            error = APIError(exc.status_code, str(exc.detail))
        error.headers.update(exc.headers or {})
        return await _api_error(request, error)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette's ServerErrorMiddleware calls this and re-raises for the log; the client
        # only ever sees the JSON body.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        if request.url.path.startswith("/v1/chat"):
            metrics.REQUESTS.labels(status="500").inc()
        return JSONResponse(error_body("the server had an internal error", SERVER_ERROR,
                                       code="internal_error"), status_code=500)
