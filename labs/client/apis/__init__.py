"""The wire protocols as the measuring client speaks them, one module each, in one table.

    api = client_api("messages")
    body = api.body("tiny", "Tell me a story.", 32, lab={"stamp": True})
    result = await measure_stream(base + api.path, body, api=api.name)

The names are the server's (`server.apis.table.APIS`): this table holds a row for each of them
and for nothing else (tests/labs/test_client_apis.py), so `--api` takes the same choices on
every tool.
"""
from __future__ import annotations

from typing import Any, Callable

from labs.client.apis import chat, messages, responses
from labs.client.apis.base import ClientApi
from server.apis.table import APIS, DEFAULT_API

CLIENT_APIS: dict[str, ClientApi] = {module.API.name: module.API for module in (chat, responses, messages)}
API_NAMES: tuple[str, ...] = tuple(APIS)

API_HELP = ("the wire protocol every stream speaks: "
            + ", ".join(f"{api.name} ({api.path})" for api in APIS.values()) + f"; default {DEFAULT_API}")

__all__ = ["API_HELP", "API_NAMES", "CLIENT_APIS", "DEFAULT_API", "ClientApi", "add_api_option", "client_api"]


def add_api_option(add: Callable[..., Any], flag: str = "--api") -> None:
    """Declare the tools' one `--api` option on argparse's `add_argument` (or pytest's
    `addoption`): `choices` makes `--api foo` exit 2 with one line that names the choices."""
    add(flag, choices=API_NAMES, default=DEFAULT_API, help=API_HELP)


def client_api(name: str) -> ClientApi:
    """The protocol named `name`; ValueError naming the choices for any other name."""
    try:
        return CLIENT_APIS[name]
    except KeyError:
        raise ValueError(f"unknown api {name!r}: choose one of {', '.join(API_NAMES)}") from None
