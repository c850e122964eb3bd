"""Hostile clients against the fixed Traefik config, as far as Traefik allows (what it does not
allow is asserted as measured, so a change in Traefik shows):

- the entry point's readTimeout bounds a WHOLE request (Go's ReadTimeout): a header trickle, a
  silent connection and a slow upload are all closed at it (60 s in the fixed config, scaled to
  1 s here); an idle keep-alive connection is closed at idleTimeout (60 s, scaled to 3 s). A slow
  upload holds an upstream connection while it trickles: Traefik forwards a body as it comes,
  and its only way to wait for the whole body (the buffering middleware) holds responses too;
- a too-large prompt reaches the server, whose 413 (OpenAI-shaped) comes back, or now and then
  Traefik's 502: Traefik has no body limit that leaves responses alone (the buffering middleware
  holds them whole: traefik-buffering);
- Traefik's own errors (the server down) are plain text, not JSON: its errors middleware needs a
  service to serve the pages.
"""
from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest

from proxies.fixed_settings import MAX_BODY
from tests.reliability.proxy_faults import (HEADER_TIMEOUT_S, IDLE_TIMEOUT_S, LATE_S, assert_openai_error, chat,
                                            connect, exchange, fixed_proxy, running_server,
                                            connections_to, seconds_until_closed)
from server.processes import free_port, wait_until

pytestmark = pytest.mark.slow
TRICKLE = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 150  # 15 s at 0.1 s/byte
UPLOAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: 100000\r\n\r\n")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with running_server() as handle:
        yield handle


@pytest.mark.parametrize("sent", ["trickle", "nothing", "slow upload"])
def test_read_timeout_closes_a_slow_or_silent_request(server: Any, sent: str) -> None:
    with fixed_proxy("traefik", server.port) as proxy, connect(proxy) as sock:
        if sent == "slow upload":
            before = connections_to(server.port)
            sock.sendall(UPLOAD + b"x")  # the headers at once, then the body at 10 bytes per second
            wait_until(lambda: connections_to(server.port) > before, 2, describe="the upload forwarded")
        open_for = seconds_until_closed(sock, limit_s=15, trickle=b"" if sent == "nothing" else
                                        TRICKLE if sent == "trickle" else b"x" * 150)
    assert open_for is not None, f"Traefik kept a {sent} open"
    assert open_for <= HEADER_TIMEOUT_S + LATE_S, open_for


def test_an_idle_keep_alive_connection_is_closed_at_idle_timeout(server: Any) -> None:
    with fixed_proxy("traefik", server.port) as proxy, connect(proxy) as sock:
        response, _ = exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert response.status == 200
        open_for = seconds_until_closed(sock, limit_s=IDLE_TIMEOUT_S + 10)
    assert open_for is not None and IDLE_TIMEOUT_S * 0.9 <= open_for <= IDLE_TIMEOUT_S + LATE_S, open_for


def test_a_too_large_prompt_gets_the_servers_own_413_or_traefiks_502(server: Any) -> None:
    """Traefik forwards the body as it comes; the server answers 413 and closes at its limit. When
    the close wins over Traefik's last writes (1 in 10 sized prompts, 0 in 10 chunked, measured),
    Traefik answers a plain-text 502 instead: the server's lingering close is what fixes it."""
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "' + b"x" * (MAX_BODY + 2**20) + b'"}]}'
    seen = server.metrics().get('streamlab_requests_total{status="413"}', 0)
    with fixed_proxy("traefik", server.port) as proxy:
        sized = httpx.post(proxy.url + "/v1/chat/completions", content=body, timeout=30,
                           headers={"content-type": "application/json"})
        chunked = httpx.post(proxy.url + "/v1/chat/completions", timeout=30,
                             content=(body[i:i + 65536] for i in range(0, len(body), 65536)),
                             headers={"content-type": "application/json"})
    for response in (sized, chunked):
        if response.status_code == 502:
            assert response.text.strip() == "Bad Gateway", response.text[:200]
        else:
            assert_openai_error(response, 413, "request_too_large")
    assert server.metrics().get('streamlab_requests_total{status="413"}', 0) - seen == 2  # both reached it


def test_traefiks_own_error_is_plain_text() -> None:
    with fixed_proxy("traefik", free_port()) as proxy:
        page = httpx.post(proxy.url + "/v1/chat/completions", json=chat(), timeout=30)
    assert page.status_code == 502 and page.text.strip() == "Bad Gateway", (page.status_code, page.text[:200])
    assert not page.headers.get("content-type", "").startswith("application/json")
