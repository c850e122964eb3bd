"""Who may use the lab knobs: open on loopback, a shared token beyond it, off with --no-lab.

Beyond-loopback servers are exercised in-process (the app built for `--host 0.0.0.0`, driven
through httpx's ASGI transport): no test binds anything but 127.0.0.1.
"""
from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from server.__main__ import parse_args
from server.config import ServerConfig
from server.engine import EngineConfig, create_engine
from server.http.app import create_app, wrap_middleware
from server.http.lab_access import is_loopback

GOOD = {"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
WITH_LAB = {**GOOD, "lab": {"tokens_per_s": 1000}}


def exchange(tokenizer: Any, config: ServerConfig, requests: list[tuple[str, str, Any, dict]],
             extra_route: bool = False) -> list[httpx.Response]:
    """Build the app for `config`, start its engine, send `requests` (method, path, json,
    headers) in order, and stop it."""
    async def run() -> list[httpx.Response]:
        engine = create_engine(EngineConfig(kind="synthetic", slots=2, max_queue=2), tokenizer)
        app: FastAPI = create_app(config, engine, tokenizer)
        if extra_route:  # a lab endpoint added later by another module: still guarded
            @app.get("/lab/later/{request_id}")
            async def record(request_id: str) -> dict:
                return {"id": request_id}
        transport = httpx.ASGITransport(app=wrap_middleware(app, config))
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return [await client.request(method, path, json=body, headers=headers)
                        for method, path, body, headers in requests]
    return asyncio.run(run())


def chat(body: dict, **headers: str) -> tuple[str, str, Any, dict]:
    return ("POST", "/v1/chat/completions", body,
            {k.replace("_", "-"): v for k, v in headers.items()})


def lab_get(path: str = "/lab/later/abc", **headers: str) -> tuple[str, str, Any, dict]:
    return ("GET", path, None, {k.replace("_", "-"): v for k, v in headers.items()})


def codes(responses: list[httpx.Response]) -> list[tuple[int, str | None]]:
    out = []
    for response in responses:
        code = response.json().get("error", {}).get("code") if response.status_code >= 400 else None
        out.append((response.status_code, code))
    return out


def test_on_loopback_without_a_token_lab_works_as_before(tokenizer) -> None:
    got = exchange(tokenizer, ServerConfig(host="127.0.0.1"),
                   [chat(WITH_LAB), lab_get()], extra_route=True)
    assert codes(got) == [(200, None), (200, None)]


def test_a_configured_token_is_required_even_on_loopback(tokenizer) -> None:
    got = exchange(tokenizer, ServerConfig(host="127.0.0.1", lab_token="s3cret"), [
        chat(WITH_LAB), chat(WITH_LAB, x_lab_token="wrong"), chat(WITH_LAB, x_lab_token="s3cret"),
        chat(GOOD), lab_get(), lab_get(x_lab_token="s3cret")], extra_route=True)
    assert codes(got) == [(403, "lab_token_required"), (403, "lab_token_invalid"), (200, None),
                          (200, None), (403, "lab_token_required"), (200, None)]
    assert got[0].json()["error"]["param"] == "lab"
    assert got[0].json()["error"]["type"] == "permission_error"


def test_beyond_loopback_without_a_token_lab_is_refused_with_how_to_enable_it(tokenizer) -> None:
    got = exchange(tokenizer, ServerConfig(host="0.0.0.0"), [
        chat(WITH_LAB), chat({**GOOD, "lab": None}), chat(GOOD),
        lab_get(), lab_get("/lab/anything/else"), lab_get("/lab")], extra_route=True)
    assert codes(got) == [(403, "lab_token_not_configured"), (200, None), (200, None),
                          (403, "lab_token_not_configured"), (403, "lab_token_not_configured"),
                          (403, "lab_token_not_configured")]
    message = got[0].json()["error"]["message"]
    assert "--lab-token" in message and "STREAMLAB_LAB_TOKEN" in message and "X-Lab-Token" in message


def test_beyond_loopback_with_a_token_lab_needs_it(tokenizer) -> None:
    got = exchange(tokenizer, ServerConfig(host="::", lab_token="s3cret"), [
        chat(WITH_LAB), chat(WITH_LAB, x_lab_token="s3cret"), lab_get(),
        lab_get(x_lab_token="s3cret")], extra_route=True)
    assert codes(got) == [(403, "lab_token_required"), (200, None), (403, "lab_token_required"),
                          (200, None)]


def test_no_lab_turns_lab_fields_and_endpoints_off(tokenizer) -> None:
    got = exchange(tokenizer, ServerConfig(host="127.0.0.1", lab_enabled=False, lab_token="s3cret"), [
        chat(WITH_LAB, x_lab_token="s3cret"), chat(GOOD), lab_get(x_lab_token="s3cret")],
        extra_route=True)
    assert codes(got) == [(400, "lab_disabled"), (200, None), (404, "not_found")]


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.10", False),
    ("example.internal", False)])
def test_what_counts_as_loopback(host, loopback) -> None:
    assert is_loopback(host) is loopback


def test_the_token_comes_from_the_flag_or_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("STREAMLAB_LAB_TOKEN", "from-env")
    assert parse_args([]).lab_token == "from-env"
    assert parse_args(["--lab-token", "from-flag"]).lab_token == "from-flag"
    monkeypatch.delenv("STREAMLAB_LAB_TOKEN")
    assert parse_args([]).lab_token is None
    assert parse_args(["--no-lab"]).lab_enabled is False
    with pytest.raises(SystemExit):
        parse_args(["--lab-token", " "])


def test_the_request_records_are_behind_the_same_guard(tokenizer) -> None:
    """`GET /lab/requests/{id}` (server/http/records.py) is a lab endpoint like any other."""
    got = exchange(tokenizer, ServerConfig(host="127.0.0.1", lab_token="s3cret"), [
        lab_get("/lab/requests/abc"), lab_get("/lab/requests/abc", x_lab_token="s3cret")])
    assert codes(got) == [(403, "lab_token_required"), (404, "record_not_found")]
