"""Hostile clients against each fixed proxy (proxies/fixed/): slow and silent connections are
closed by the proxy's own timeouts, a too-large prompt gets a 413 the SDKs understand, the
proxy's own errors are OpenAI-shaped JSON, nginx hides its version, and Envoy's admin ignores a
web page's cross-site POST. Each test also shows what it depends on really happened (the
trickle went on, the server never saw the prompt, the defaults really misbehave)."""
from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import openai
import pytest

from proxies import variant
from proxies.base import ProxyName
from proxies.fixed_settings import MAX_BODY
from proxies.runtime.local import run_proxy
from server.processes import free_port, wait_until
from tests.reliability.proxy_faults import (HEADER_TIMEOUT_S, IDLE_CLOSE_S, LATE_S, PROXIES,
                                            SILENT_BOUND_S, assert_openai_error, chat, connect,
                                            content_event, exchange, fixed_proxy,
                                            seconds_until_closed)
from tests.runtimes import on_free_ports

pytestmark = pytest.mark.slow
TRICKLE = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 150  # 20 s at 0.1 s/byte
TOO_LARGE = MAX_BODY + 1024 * 1024  # a 9 MB prompt
CROSS_SITE = {"Origin": "http://attacker.example", "Referer": "http://attacker.example/page",
              "Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def server(proxy_upstream: Any) -> Any:
    return proxy_upstream  # shared by the session (conftest)


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_header_trickle_is_closed_within_the_header_timeout(proxy_name: ProxyName, server: Any) -> None:
    with fixed_proxy(proxy_name, server.port) as proxy, connect(proxy) as sock:
        open_for = seconds_until_closed(sock, limit_s=len(TRICKLE) * 0.1, trickle=TRICKLE)
    assert open_for is not None, f"{proxy_name} kept a header trickle open for its whole 20 s"
    # Closed by the header timeout: after it, and well before the idle timeout would have.
    assert HEADER_TIMEOUT_S * 0.9 <= open_for <= HEADER_TIMEOUT_S + LATE_S, open_for


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_silent_connection_is_closed(proxy_name: ProxyName, server: Any) -> None:
    bound = SILENT_BOUND_S[proxy_name]
    with fixed_proxy(proxy_name, server.port) as proxy, connect(proxy) as sock:
        open_for = seconds_until_closed(sock, limit_s=bound + 10)
    assert open_for is not None, f"{proxy_name} kept a silent connection open for {bound + 10:.0f} s"
    assert bound * 0.9 <= open_for <= bound + LATE_S, open_for


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_idle_keep_alive_connection_is_closed(proxy_name: ProxyName, server: Any) -> None:
    with fixed_proxy(proxy_name, server.port) as proxy, connect(proxy) as sock:
        response, _ = exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert response.status == 200 and not response.will_close  # kept alive, then left idle
        open_for = seconds_until_closed(sock, limit_s=IDLE_CLOSE_S[proxy_name] + 10)
    assert open_for is not None, f"{proxy_name} kept an idle keep-alive connection open"
    # The idle timeout, not the (shorter) header timeout, closed it.
    bound = IDLE_CLOSE_S[proxy_name]
    assert max(bound * 0.9, HEADER_TIMEOUT_S + LATE_S) <= open_for <= bound + LATE_S, open_for


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_too_large_prompt_gets_a_413_the_sdk_reads_once(proxy_name: ProxyName, server: Any) -> None:
    prompt = [{"role": "user", "content": "x" * TOO_LARGE}]
    seen_by_server = server.metrics().get('streamlab_requests_total{status="413"}', 0)
    with fixed_proxy(proxy_name, server.port) as proxy:
        raw = httpx.post(proxy.url + "/v1/chat/completions", timeout=30,
                         json={"model": "tiny", "stream": True, "messages": prompt})
        assert_openai_error(raw, 413, "request_too_large")
        # The OpenAI SDK retries 408, 429 and 5xx: a 413 is raised at once, with our message.
        sdk = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=2, timeout=30)
        with pytest.raises(openai.APIStatusError) as raised:
            sdk.chat.completions.create(model="tiny", messages=prompt, stream=True)
        proxy.wait_access_log(2, timeout_s=10)
        entries = proxy.access_entries()
    assert raised.value.status_code == 413 and raised.value.code == "request_too_large"
    assert "larger than the proxy accepts" in raised.value.message
    assert [entry["status"] for entry in entries] == ["413", "413"], entries  # no retry, no 503
    # The proxy answered: the server never saw the prompt.
    assert server.metrics().get('streamlab_requests_total{status="413"}', 0) == seen_by_server


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_too_large_chunked_prompt_gets_a_413_too(proxy_name: ProxyName, server: Any) -> None:
    """No Content-Length to judge by: nginx and Envoy count the body; HAProxy cannot, so it
    refuses any chunked body with 411, in the same shape (test_bodies_nginx_haproxy_apache.py)."""
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "' + b"x" * TOO_LARGE + b'"}]}'
    chunks = (body[start:start + 65536] for start in range(0, len(body), 65536))
    seen_by_server = server.metrics().get('streamlab_requests_total{status="413"}', 0)
    with fixed_proxy(proxy_name, server.port) as proxy:
        response = httpx.post(proxy.url + "/v1/chat/completions", content=chunks, timeout=30,
                              headers={"content-type": "application/json"})
    assert response.request.headers.get("transfer-encoding") == "chunked"
    if proxy_name == "haproxy":
        assert_openai_error(response, 411, "length_required")
    else:
        assert_openai_error(response, 413, "request_too_large")
    assert server.metrics().get('streamlab_requests_total{status="413"}', 0) == seen_by_server


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_unparsable_request_answer(proxy_name: ProxyName, server: Any) -> None:
    """nginx and Envoy answer 400 in the OpenAI shape. HAProxy (2.6 and 3.2 alike: the whole
    table passes with LAB_PROXY_VERSION=oldest) answers a request it cannot parse from its
    connection layer, which only knows its built-in page (the config says so)."""
    with fixed_proxy(proxy_name, server.port) as proxy, connect(proxy) as sock:
        response, body = exchange(sock, b"GARBAGE\r\n\r\n")
        content_type, text = response.getheader("content-type", ""), body.decode()
    assert response.status == 400
    if proxy_name == "haproxy":
        assert content_type == "text/html" and "400 Bad request" in text
    else:
        assert content_type.startswith("application/json"), (content_type, text)
        assert json.loads(text)["error"]["code"] == "bad_request"


@pytest.mark.parametrize("proxy_name", PROXIES)
def test_proxy_own_error_is_openai_shaped_and_the_defaults_are_not(proxy_name: ProxyName) -> None:
    nobody = free_port()  # the server is down
    with fixed_proxy(proxy_name, nobody) as proxy:
        raw = httpx.post(proxy.url + "/v1/chat/completions", json=chat(), timeout=30)
        error = assert_openai_error(raw, (502, 503), "upstream_unavailable")
        sdk = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=30)
        with pytest.raises(openai.InternalServerError) as raised:
            sdk.chat.completions.create(model="tiny", messages=chat()["messages"])
    assert error["type"] == "server_error"
    # The SDK found the fields it parses: its message quotes ours ("Error code: 503 - ...").
    assert raised.value.code == "upstream_unavailable" and error["message"] in raised.value.message
    with run_proxy(on_free_ports(variant(proxy_name, "defaults"), nobody)) as bare:
        page = httpx.post(bare.url + "/v1/chat/completions", json=chat(), timeout=30)
    assert page.status_code in (502, 503)
    assert not page.headers.get("content-type", "").startswith("application/json"), page.text[:200]


def test_nginx_does_not_announce_its_version(server: Any) -> None:
    with fixed_proxy("nginx", server.port) as proxy:
        ok = httpx.get(proxy.url + "/healthz", timeout=10)
    with fixed_proxy("nginx", free_port()) as proxy:
        error = httpx.get(proxy.url + "/healthz", timeout=10)
    assert ok.status_code == 200 and ok.headers["server"] == "nginx"
    assert error.status_code == 502 and error.headers["server"] == "nginx"
    assert "1." not in error.text and "nginx" not in error.text
    with run_proxy(on_free_ports(variant("nginx", "defaults"), server.port)) as bare:
        announced = httpx.get(bare.url + "/healthz", timeout=10).headers["server"]
    assert announced.startswith("nginx/1."), announced  # what server_tokens off hides


def _stream_in_background(url: str) -> tuple[threading.Thread, list[str]]:
    lines: list[str] = []

    def read() -> None:
        body = chat(max_tokens=40, tokens_per_s=20)  # 2 s of tokens
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=10) as response:
            lines.extend(response.iter_lines())
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, lines


def test_envoy_admin_ignores_a_mutating_post_mid_stream(server: Any) -> None:
    """The fixed admin is on a Unix socket (no web page reaches it); whoever opens the socket
    still gets only the read-only paths."""
    with fixed_proxy("envoy", server.port) as proxy, proxy.admin() as admin:
        thread, lines = _stream_in_background(proxy.url)
        wait_until(lambda: any(map(content_event, lines)), 10, describe="a stream in flight")
        forged = admin.post("/quitquitquit", headers=CROSS_SITE, content=b"x=1")
        events_before = sum(map(content_event, lines))
        assert "data: [DONE]" not in lines  # the POST came mid-stream
        thread.join(timeout=15)
        assert proxy.process.process is not None and proxy.process.process.poll() is None
        assert admin.get("/ready").status_code == 200
        assert "cluster.upstream.upstream_rq_total" in proxy.stats("cluster.upstream.")
        read = admin.get("/stats?filter=upstream_rq_total")
        changes = {path: admin.post(path, headers=CROSS_SITE).status_code
                   for path in ("/healthcheck/fail", "/drain_listeners", "/logging?level=trace",
                                "/runtime_modify?a=b", "/reset_counters")}
    assert forged.status_code == 403 and "not allowed" in forged.text, (forged.status_code, forged.text)
    assert set(changes.values()) == {403}, changes
    assert read.status_code == 200 and "upstream_rq_total" in read.text  # reading still works
    # The stream was not cut: more tokens came after the POST, then the end.
    assert sum(map(content_event, lines)) > events_before and "data: [DONE]" in lines, lines[-3:]


def test_envoy_defaults_admin_is_stopped_by_that_post(server: Any) -> None:
    """The other direction: without the allow list the same form POST stops Envoy."""
    with run_proxy(on_free_ports(variant("envoy", "defaults"), server.port)) as proxy:
        forged = httpx.post(proxy.admin_url + "/quitquitquit", headers=CROSS_SITE, content=b"x=1", timeout=5)
        assert proxy.process.process is not None
        wait_until(lambda: proxy.process.process.poll() is not None, 10, describe="Envoy to exit")
    assert forged.status_code == 200
