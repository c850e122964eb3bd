"""The wire protocols as the measuring client speaks them, one module each, in one table.

    api = client_api("messages")
    body = api.body("tiny", "Tell me a story.", 32, lab={"stamp": True})
    result = await measure_stream(base + api.path, body, api=api.name)

The names are the server's (`server.apis.table.APIS`): this table holds a row for each of them
and for nothing else (tests/labs/test_client_apis.py), so `--api` takes the same choices on
every tool.
"""
from __future__ import annotations

from labs.client.apis import chat, messages, responses
from labs.client.apis.base import ClientApi
from server.apis.table import APIS, DEFAULT_API

CLIENT_APIS: dict[str, ClientApi] = {module.API.name: module.API for module in (chat, responses, messages)}
API_NAMES: tuple[str, ...] = tuple(APIS)

__all__ = ["API_NAMES", "CLIENT_APIS", "DEFAULT_API", "ClientApi", "client_api"]


def client_api(name: str) -> ClientApi:
    """The protocol named `name`; ValueError naming the choices for any other name."""
    try:
        return CLIENT_APIS[name]
    except KeyError:
        raise ValueError(f"unknown api {name!r}: choose one of {', '.join(API_NAMES)}") from None
