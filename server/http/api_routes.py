"""The routes of the protocols beside chat: `POST /v1/responses`, `GET /v1/responses/{id}` and
`POST /v1/messages` (server/apis/ says what each request and stream looks like).

They admit through the same `Service.accept` as chat (engine, knobs, limits, metrics, records)
and answer with the same replies (server/stream/); only the parsing, the errors' shape and the
Responses store differ. The two POSTs are also served by the fast lane (server/http/fast_lane.py);
these are their ASGI routes, for the requests the lane hands back (an `X-Request-Id`, a layer
around the app).
"""
from __future__ import annotations

import time

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server import errors, metrics
from server.apis.lab import LAB_HEADER
from server.apis.messages import VERSION_HEADER
from server.apis.table import MESSAGES, RESPONSES, Api
from server.errors import APIError
from server.http import records
from server.http.lab_access import TOKEN_HEADER
from server.http.service import ClientLeft, Service, error_reply
from server.stream.json_reply import JSONCompletion
from server.stream.sse_writer import SSECompletion


def counted_error(api: Api, error: APIError) -> JSONResponse:
    reply = error_reply(api, error)
    metrics.REQUESTS.labels(status=str(reply.status_code)).inc()
    return reply


def api_routes(service: Service) -> list[Route]:
    store = service.responses

    async def post(request: Request, api: Api) -> Response:
        arrived_at = time.monotonic()
        try:
            body = await service.read_body(request)
            parsed, job = await service.accept(api, body, request.headers.get(TOKEN_HEADER),
                                               arrived_at, request.receive,
                                               VERSION_HEADER in request.headers,
                                               request.headers.get(LAB_HEADER))
        except ClientDisconnect:
            metrics.REQUESTS.labels(status=errors.CLIENT_CLOSED).inc()
            return Response(status_code=int(errors.CLIENT_CLOSED))
        except APIError as exc:
            return counted_error(api, exc)
        except ClientLeft:
            return Response(status_code=int(errors.CLIENT_CLOSED))
        return records.track(request, SSECompletion(job) if parsed.stream else JSONCompletion(job),
                             api.name)

    async def create_response(request: Request) -> Response:
        return await post(request, RESPONSES)

    async def create_message(request: Request) -> Response:
        return await post(request, MESSAGES)

    async def retrieve_response(request: Request) -> Response:
        """The stored object; with `stream=true`, its events again after `starting_after`."""
        response_id = request.path_params["response_id"]
        entry = store.get(response_id)
        try:
            if entry is None:
                raise APIError(404, f"No response found with id '{response_id}' (kept "
                               f"{store.window_s:g} s after creation)", param="response_id",
                               code="response_not_found")
            if request.query_params.get("stream", "false").lower() != "true":
                # Its status changes while it runs (in_progress, then completed): a cache in the
                # way must not keep it (Varnish kept a poll's in_progress for 120 s without this).
                return JSONResponse(entry.current(response_id), headers={"Cache-Control": "no-store"})
            after = request.query_params.get("starting_after", "-1")
            if not after.lstrip("-").isdigit() or int(after) < -1:
                raise APIError(400, f"starting_after must be a sequence number, not {after!r}",
                               param="starting_after")
            job = await service.admit(entry.request, time.monotonic(), request.receive, RESPONSES,
                                      response_id, entry.created, entry.keep)
        except APIError as exc:
            return counted_error(RESPONSES, exc)
        except ClientLeft:
            return Response(status_code=int(errors.CLIENT_CLOSED))
        # Sequence numbers count from 0: the events up to N are the first N + 1.
        return records.track(request, SSECompletion(job, skip_events=int(after) + 1), RESPONSES.name)

    return [Route(RESPONSES.path, create_response, methods=["POST"]),
            Route(RESPONSES.path + "/{response_id}", retrieve_response, methods=["GET"]),
            Route(MESSAGES.path, create_message, methods=["POST"])]
