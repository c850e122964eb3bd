"""No fixed config says its proxy's version: in any header (`Server`, `Via`, `X-Powered-By`) or
body, on a normal answer and on the proxy's own error page (the server down). Measured through
every proxy kind's exported config; the defaults of Apache and Varnish are shown to say it, so
the test proves the fixed configs' settings, not an accident of the build."""
from __future__ import annotations

import re
from typing import Any, Iterator

import httpx
import pytest

from proxies import variant
from proxies.kinds import PROXY_NAMES
from proxies.runtime.base import Runtime
from proxies.runtime.local import run_proxy
from server.processes import free_port
from tests.reliability.proxy_faults import chat, fixed, on_releases, running_server
from tests.runtimes import on_free_ports

pytestmark = pytest.mark.slow
VERSION = re.compile(r"\b\d+\.\d+(\.\d+)?\b")
HEADERS = ("server", "via", "x-powered-by")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with running_server() as handle:
        yield handle


# Each Via entry starts with the HTTP version it was received in (RFC 9110 7.6.3), not the
# proxy's: Caddy 2.11.4 answers with `Via: 1.1 Caddy` (2.6.2 with `Server: Caddy`, no Via);
# Varnish says its own version after it.
VIA_PROTOCOL = re.compile(r"(^|,)\s*(HTTP/)?\d\.\d\s+", re.I)


def said(response: httpx.Response) -> list[str]:
    """The header values and body lines that carry a version."""
    values = [(name, response.headers[name]) for name in HEADERS if name in response.headers]
    body = response.text if "json" not in response.headers.get("content-type", "") else ""
    return [f"{name}: {value}" for name, value in values
            if VERSION.search(VIA_PROTOCOL.sub(r"\1", value) if name == "via" else value)] + [
        line for line in body.splitlines() if VERSION.search(line)]


@pytest.mark.parametrize("proxy_name", on_releases(PROXY_NAMES))
def test_no_fixed_config_says_its_version(proxy_name: str, server: Any, runtime: Runtime) -> None:
    with runtime.run_proxy(fixed(proxy_name, server.port)) as proxy:
        answer = httpx.get(proxy.url + "/healthz", timeout=10)
    with runtime.run_proxy(fixed(proxy_name, free_port())) as proxy:
        own = httpx.post(proxy.url + "/v1/chat/completions", json=chat(), timeout=30)
    assert answer.status_code == 200 and own.status_code in (502, 503)
    assert said(answer) == [] and said(own) == [], (said(answer), said(own))


@pytest.mark.parametrize("proxy_name, header", [("apache", "server"), ("varnish", "via")])
def test_their_defaults_do(proxy_name: str, header: str) -> None:
    """On their own answers (the server down): a proxied answer keeps the server's own `Server`."""
    with run_proxy(on_free_ports(variant(proxy_name, "defaults"), free_port())) as proxy:
        own = httpx.post(proxy.url + "/v1/chat/completions", json=chat(), timeout=30)
    assert VERSION.search(own.headers.get(header, "")), dict(own.headers)
