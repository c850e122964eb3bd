"""Hostile clients against the fixed Varnish, Apache and Caddy configs, as far as each program
allows (what it does not allow is asserted as measured, so a change in the program shows):

- a too-large prompt gets 413 in the OpenAI shape: Varnish and Apache judge the Content-Length
  (a chunked prompt goes on to the server's own limit behind Varnish; Apache refuses any chunked
  body with 411, test_bodies_nginx_haproxy_apache.py); Caddy counts the body as it forwards it,
  so a chunked prompt gets its own 413, but one with a Content-Length is already on its way: the
  server's own 413 or Caddy's 502 (Caddy 2.6 reports the limit it hit mid-proxy as a bad
  gateway) comes back, whichever side sees the limit first, both in the OpenAI shape, or (seen
  under load) the connection closes before the answer is complete;
- the proxy's own errors (the server down) are OpenAI-shaped JSON, and the defaults' are not;
- a header trickle is closed by the header timeout (Apache's RequestReadTimeout, Caddy's
  read_header), and a silent connection by Varnish's runtime parameter timeout_idle (5 s).
"""
from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest

from proxies import variant
from proxies.base import ProxyName
from proxies.fixed_settings import MAX_BODY
from proxies.runtime.local import run_proxy
from server.processes import free_port
from tests.reliability.proxy_faults import (HEADER_TIMEOUT_S, LATE_S, MORE_PROXIES, assert_openai_error,
                                            chat, connect, fixed_proxy, running_server,
                                            seconds_until_closed)
from tests.runtimes import on_free_ports

pytestmark = pytest.mark.slow
TOO_LARGE = MAX_BODY + 1024 * 1024
TRICKLE = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 150  # 15 s at 0.1 s/byte
VARNISH_TIMEOUT_IDLE_S = 5.0  # the runtime parameter's default


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with running_server() as handle:
        yield handle


def _prompt() -> bytes:
    return b'{"model": "tiny", "messages": [{"role": "user", "content": "' + b"x" * TOO_LARGE + b'"}]}'


@pytest.mark.parametrize("proxy_name", MORE_PROXIES)
def test_too_large_prompt(proxy_name: ProxyName, server: Any) -> None:
    seen = server.metrics().get('streamlab_requests_total{status="413"}', 0)
    body = _prompt()
    with fixed_proxy(proxy_name, server.port) as proxy:
        try:
            sized: httpx.Response | None = httpx.post(
                proxy.url + "/v1/chat/completions", content=body, timeout=30,
                headers={"content-type": "application/json"})
        except httpx.RemoteProtocolError:  # Caddy, measured under load: the answer cut short
            assert proxy_name == "caddy"
            sized = None
        chunked = httpx.post(proxy.url + "/v1/chat/completions", timeout=30,
                             content=(body[i:i + 65536] for i in range(0, len(body), 65536)),
                             headers={"content-type": "application/json"})
    server_413s = server.metrics().get('streamlab_requests_total{status="413"}', 0) - seen
    # Chunked: Caddy's own 413, the server's own (same shape) behind Varnish, Apache's own 411.
    if proxy_name == "apache":
        assert_openai_error(chunked, 411, "length_required")
    else:
        assert_openai_error(chunked, 413, "request_too_large")
    if proxy_name == "caddy":
        if sized is not None:
            assert_openai_error(sized, (413, 502))
    else:
        assert sized is not None
        assert_openai_error(sized, 413, "request_too_large")
        # Varnish: the proxy's 413 from the Content-Length, the server's for chunked; Apache: neither.
        assert server_413s == (0 if proxy_name == "apache" else 1), server_413s


@pytest.mark.parametrize("proxy_name", MORE_PROXIES)
def test_proxy_own_error_is_openai_shaped_and_the_defaults_are_not(proxy_name: ProxyName) -> None:
    nobody = free_port()
    with fixed_proxy(proxy_name, nobody) as proxy:
        error = assert_openai_error(httpx.post(proxy.url + "/v1/chat/completions", json=chat(), timeout=30),
                                    (502, 503), "upstream_unavailable")
    assert error["type"] == "server_error"
    with run_proxy(on_free_ports(variant(proxy_name, "defaults"), nobody)) as bare:
        page = httpx.post(bare.url + "/v1/chat/completions", json=chat(), timeout=30)
    assert page.status_code in (502, 503)
    assert not page.headers.get("content-type", "").startswith("application/json"), page.text[:200]


@pytest.mark.parametrize("proxy_name", ["apache", "caddy"])
def test_header_trickle_is_closed_within_the_header_timeout(proxy_name: ProxyName, server: Any) -> None:
    with fixed_proxy(proxy_name, server.port) as proxy, connect(proxy) as sock:
        open_for = seconds_until_closed(sock, limit_s=len(TRICKLE) * 0.1, trickle=TRICKLE)
    assert open_for is not None, f"{proxy_name} kept a header trickle open"
    assert HEADER_TIMEOUT_S * 0.9 <= open_for <= HEADER_TIMEOUT_S + LATE_S, open_for


def test_varnish_closes_a_silent_connection_after_timeout_idle(server: Any) -> None:
    with fixed_proxy("varnish", server.port) as proxy, connect(proxy) as sock:
        open_for = seconds_until_closed(sock, limit_s=VARNISH_TIMEOUT_IDLE_S + 10)
    assert open_for is not None and VARNISH_TIMEOUT_IDLE_S * 0.9 <= open_for <= VARNISH_TIMEOUT_IDLE_S + LATE_S, open_for
