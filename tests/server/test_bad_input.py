"""Bad input: each gets a clear OpenAI-style error with the right status, and the server keeps
serving (every case is followed by a good request on the same server)."""
from __future__ import annotations

import json

import httpx
import pytest

GOOD = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}


def with_fields(**fields):
    body = dict(GOOD)
    body.update(fields)
    return json.dumps(body).encode()


def without(name):
    return json.dumps({k: v for k, v in GOOD.items() if k != name}).encode()


# (raw body, status, param, code)
CASES = [
    pytest.param(b'{"model": "tiny", "messages": [', 400, None, "invalid_json", id="malformed-json"),
    pytest.param(b"", 400, None, "invalid_json", id="empty-body"),
    pytest.param(b"[1, 2]", 400, None, None, id="not-an-object"),
    pytest.param(without("messages"), 400, "messages", "missing", id="missing-messages"),
    pytest.param(with_fields(messages=[]), 400, "messages", None, id="empty-messages"),
    pytest.param(with_fields(messages="hi"), 400, "messages", None, id="messages-wrong-type"),
    pytest.param(with_fields(messages=[{"role": "wizard", "content": "x"}]), 400,
                 "messages[0].role", None, id="unknown-role"),
    pytest.param(with_fields(messages=[{"role": "user", "content": 5}]), 400,
                 "messages[0].content", None, id="content-wrong-type"),
    pytest.param(without("model"), 400, "model", "missing", id="missing-model"),
    pytest.param(with_fields(max_tokens="5"), 400, "max_tokens", None, id="max-tokens-string"),
    pytest.param(with_fields(max_tokens=-1), 400, "max_tokens", None, id="max-tokens-negative"),
    pytest.param(with_fields(max_tokens=0), 400, "max_tokens", None, id="max-tokens-zero"),
    pytest.param(with_fields(max_tokens=10**9), 400, "max_tokens", "context_length_exceeded",
                 id="max-tokens-over-context"),
    pytest.param(with_fields(max_completion_tokens=10**9), 400, "max_completion_tokens",
                 "context_length_exceeded", id="max-completion-tokens-over-context"),
    pytest.param(with_fields(stream="yes"), 400, "stream", None, id="stream-wrong-type"),
    pytest.param(with_fields(n=2), 400, "n", None, id="n-above-one"),
    pytest.param(with_fields(temperature=2.5), 400, "temperature", None, id="temperature-high"),
    pytest.param(with_fields(temperature=-0.1), 400, "temperature", None, id="temperature-negative"),
    pytest.param(with_fields(top_p=0), 400, "top_p", None, id="top-p-zero"),
    pytest.param(with_fields(top_p=1.5), 400, "top_p", None, id="top-p-high"),
    pytest.param(with_fields(stop=["a", "b", "c", "d", "e"]), 400, "stop", None, id="five-stops"),
    pytest.param(with_fields(stop=""), 400, "stop", None, id="empty-stop"),
    pytest.param(with_fields(lab={"tokens_per_sec": 5}), 400, "lab.tokens_per_sec",
                 "extra_forbidden", id="unknown-lab-field"),
    pytest.param(with_fields(lab={"tokens_per_s": -5}), 400, "lab.tokens_per_s", None,
                 id="negative-lab-rate"),
    pytest.param(with_fields(lab={"error_mode": "explode"}), 400, "lab.error_mode", None,
                 id="unknown-error-mode"),
    pytest.param(with_fields(lab={"omit_headers": ["server"]}), 400, "lab.omit_headers", None,
                 id="unknown-omit-header"),
    pytest.param(with_fields(lab="fast"), 400, "lab", None, id="lab-not-an-object"),
    pytest.param(with_fields(model="gpt-9"), 404, "model", "model_not_found", id="unknown-model"),
    pytest.param(with_fields(messages=[{"role": "user", "content": "x " * 25000}]), 400,
                 "messages", "context_length_exceeded", id="prompt-over-context"),
    pytest.param(with_fields(messages=[{"role": "user", "content": "x " * 40000}]), 413, None,
                 "request_too_large", id="oversized-body"),
]


def assert_openai_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and "Traceback" not in error["message"]
    return error


@pytest.mark.parametrize(("raw", "status", "param", "code"), CASES)
def test_bad_request_gets_a_clear_error_and_the_server_keeps_serving(api, raw, status, param, code):
    response = api.client.post("/v1/chat/completions", content=raw,
                               headers={"content-type": "application/json"})
    error = assert_openai_error(response, status)
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    good = api.client.post("/v1/chat/completions", json={**GOOD, "max_tokens": 2})
    assert good.status_code == 200 and good.json()["choices"][0]["message"]["content"]


def test_oversized_chunked_body_is_counted_and_rejected(api):
    def chunks():
        for _ in range(40):
            yield b"x" * 4096  # no Content-Length: the limit must count what arrives

    response = api.client.post("/v1/chat/completions", content=chunks(),
                               headers={"content-type": "application/json"})
    assert_openai_error(response, 413)
    assert api.client.post("/v1/chat/completions", json={**GOOD, "max_tokens": 1}).status_code == 200


def test_unknown_route_and_wrong_method_are_json(api):
    assert assert_openai_error(api.client.get("/v1/nothing"), 404)["code"] == "not_found"
    # GET is EventSource's form of the POST (server/http/event_source.py); PUT is no form of it.
    assert assert_openai_error(api.client.put("/v1/chat/completions"), 405)["code"] == \
        "method_not_allowed"


def test_unknown_top_level_fields_are_ignored_like_other_servers(api):
    response = api.client.post("/v1/chat/completions",
                               json={**GOOD, "max_tokens": 1, "user": "x", "presence_penalty": 0})
    assert response.status_code == 200


def test_model_may_be_named_by_its_path(api, server):
    from server.launcher import DEFAULT_MODEL_DIR

    response = api.client.post("/v1/chat/completions",
                               json={**GOOD, "model": str(DEFAULT_MODEL_DIR), "max_tokens": 1})
    assert response.status_code == 200
