"""The measuring client over HTTP/2 with TLS (ALPN h2): the same metrics as over HTTP/1.1 through
the same nginx (TLS + HTTP/2 listener, a certificate made at run time), HEADERS timed."""
from __future__ import annotations

import contextlib

import asyncio
from typing import Iterator

import pytest

from labs.client import measure_stream
from labs.fakes.upstream import FakeUpstream, fake_upstream
from proxies import NginxSettings
from proxies.runtime.local import LocalProxy, run_proxy
from server.processes import free_port

BODY = {"model": "tiny", "stream": True, "messages": []}
EVENTS, INTERVAL_S = 10, 0.05


@contextlib.contextmanager
def tls_nginx_of(series: str | None = None) -> Iterator[LocalProxy]:
    upstream: FakeUpstream
    with fake_upstream() as upstream:
        settings = NginxSettings(tls_http2=True, proxy_buffering=False, proxy_http_version="1.1",
                                 proxy_connection_header="", listen_port=free_port(),
                                 upstream_port=upstream.port, version=series)
        with run_proxy(settings) as proxy:
            yield proxy


@pytest.fixture(scope="module")
def tls_nginx() -> Iterator[LocalProxy]:
    with tls_nginx_of() as proxy:
        yield proxy


def url(proxy: LocalProxy, events: int = EVENTS, interval_s: float = INTERVAL_S) -> str:
    return (f"https://127.0.0.1:{proxy.settings.listen_port}/v1/chat/completions"
            f"?n={events}&interval={interval_s}")


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http/1.1"])
def test_same_metrics_over_both_protocols(tls_nginx: LocalProxy, http2: bool) -> None:
    result = asyncio.run(measure_stream(url(tls_nginx), BODY, http2=http2, verify_tls=False))
    assert result.status == 200 and result.outcome == "complete", result.error
    assert result.http_version == ("2" if http2 else "1.1")
    assert result.content_events == EVENTS and result.saw_done
    assert result.headers_s is not None and result.headers_s <= (result.ttft_s or 0)
    # Paced events, one read (DATA frame) each: the client times frames as it times reads.
    assert result.ttft_s is not None and result.e2e_s is not None
    assert result.e2e_s - result.ttft_s >= 0.5 * (EVENTS - 1) * INTERVAL_S
    assert result.bursts >= EVENTS - 2, result.content_reads
    assert result.headers["content-type"].startswith("text/event-stream")


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http/1.1"])
def test_leaving_closes_the_tls_connection_at_once(tls_nginx: LocalProxy, http2: bool) -> None:
    """A client that leaves mid-stream sends its FIN right after the close_notify: nginx, which
    does not read an HTTP/1.1 client while it streams to it, ends the request (its access line)
    within a pause of the stream, not when the stream would have ended (10 s)."""
    before = len(tls_nginx.access_log())
    result = asyncio.run(measure_stream(url(tls_nginx, events=50, interval_s=0.2), BODY, http2=http2,
                                        verify_tls=False, disconnect_after_events=1))
    assert result.outcome == "disconnected" and result.http_version == ("2" if http2 else "1.1")
    tls_nginx.wait_access_log(before + 1, timeout_s=1.0)
    assert float(tls_nginx.access_entries()[-1]["request_time"]) < 1.0


def test_the_lab_certificate_is_refused_when_verified(tls_nginx: LocalProxy) -> None:
    result = asyncio.run(measure_stream(url(tls_nginx), BODY, http2=True))
    assert result.outcome == "connect-error" and "CERTIFICATE_VERIFY_FAILED" in (result.error or "")


def test_http2_needs_https() -> None:
    with pytest.raises(ValueError, match="https URL"):
        asyncio.run(measure_stream("http://127.0.0.1:1/v1/chat/completions", BODY, http2=True))


@pytest.mark.parametrize("series", ["1.22", "1.30"])
def test_ttfb_is_the_response_not_the_connection_frames(series: str) -> None:
    """nginx over HTTP/2 sends a SETTINGS ack and a WINDOW_UPDATE for the request body at once;
    nginx 1.22 holds the HEADERS frame until the first DATA, 1.30 sends it when the upstream's
    headers come: either way TTFB is the HEADERS frame's read, never the connection frames'."""
    silence_s = 0.6
    with tls_nginx_of(series) as proxy:
        target = f"https://127.0.0.1:{proxy.settings.listen_port}/silence?k=0&silence={silence_s}"
        result = asyncio.run(measure_stream(target, BODY, http2=True, verify_tls=False))
    assert result.http_version == "2" and result.headers_s is not None
    assert result.ttfb_s == result.headers_s, (result.ttfb_s, result.headers_s)
    if series == "1.22":
        assert result.headers_s >= silence_s / 2, result.headers_s
    else:
        assert result.headers_s < silence_s / 2, result.headers_s
