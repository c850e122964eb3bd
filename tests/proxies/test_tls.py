"""TLS listeners with HTTP/2: the fixed TLS configs (proxies/fixed/nginx-tls.conf, envoy-tls.yaml)
stream as the other fixed configs do, measured by the lab's h2 client, in both runtimes.

The exports name the user's certificate (/etc/ssl/...); each run swaps in the self-signed pair
made at run time (proxies/tls.py), and nothing else. Every check first proves the protocol really
was HTTP/2 (ALPN h2), so a listener that fell back to HTTP/1.1 cannot pass in its place.
"""
from __future__ import annotations

import http.client
import os
import socket
import ssl
from typing import Any

import pytest
from pydantic import ValidationError

from labs.client.http2 import tls_context
from labs.fakes.upstream import FakeUpstream, fake_upstream
from labs.client.results import StreamResult
from proxies import ConfigInvalid, EnvoySettings, NginxSettings, render, variant
from proxies.base import ProxyName, ProxySettings
from proxies.export import with_lab_certificate
from proxies.runtime import get_runtime
from proxies.runtime.base import Runtime
from proxies.runtime.docker import check
from proxies.runtime.images import image_for
from proxies.tls import CertificateMissing, self_signed
from server.processes import port_accepts, wait_until
from tests.runtimes import on_free_ports, require_images, stream

TLS_PROXIES: tuple[ProxyName, ...] = ("nginx", "envoy")
EVENTS, INTERVAL_S = 20, 0.05
PACED = f"/v1/chat/completions?n={EVENTS}&interval={INTERVAL_S}"
# A stream's first content event is due one interval after the headers (the role chunk rides
# with them): TTFT within a few intervals, as in the plain fixed configs' check.
TTFT_MARGIN_S = 4 * INTERVAL_S


def fixed_tls(name: ProxyName, upstream_port: int) -> ProxySettings:
    settings = with_lab_certificate(variant(name, "fixed-tls"))
    assert set(settings.tls_files().values()) == set(self_signed())  # only the files were swapped
    return on_free_ports(settings, upstream_port)


def over(url: str, http2: bool = True, **options: Any) -> StreamResult:
    return stream(url, http2=http2, verify_tls=False, **options)


@pytest.mark.parametrize("name", TLS_PROXIES)
def test_fixed_tls_config_streams_every_event_at_once_over_h2(name: ProxyName, runtime: Runtime,
                                                              upstream: FakeUpstream) -> None:
    with runtime.run_proxy(fixed_tls(name, upstream.port)) as proxy:
        assert proxy.url.startswith("https://")
        result = over(proxy.url + PACED)
    assert result.http_version == "2", result.error
    assert result.status == 200 and result.outcome == "complete" and result.saw_done, result.error
    assert "content-encoding" not in result.headers, "text/event-stream must not be compressed"
    assert result.content_events == EVENTS
    assert result.headers_s is not None and result.ttft_s is not None
    assert result.headers_s <= result.ttft_s < TTFT_MARGIN_S
    # The pacing really happened (no lump at the end), and each event came in its own DATA frame.
    assert result.e2e_s is not None and result.e2e_s - result.ttft_s >= 0.5 * (EVENTS - 1) * INTERVAL_S
    assert result.bursts >= EVENTS - 3, result.content_reads  # a busy 2-core box may merge an odd pair


@pytest.mark.parametrize("name", TLS_PROXIES)
def test_http11_still_works_on_the_same_tls_listener(name: ProxyName, runtime: Runtime,
                                                     upstream: FakeUpstream) -> None:
    """A client that offers only http/1.1 by ALPN (an older SDK, curl --http1.1) streams too."""
    with runtime.run_proxy(fixed_tls(name, upstream.port)) as proxy:
        h2, h1 = over(proxy.url + PACED), over(proxy.url + PACED, http2=False)
    assert (h2.http_version, h1.http_version) == ("2", "1.1")
    assert h1.status == 200 and h1.outcome == "complete" and h1.content_events == EVENTS, h1.error
    assert h1.ttft_s is not None and h1.ttft_s < TTFT_MARGIN_S
    assert h1.bursts >= EVENTS - 3, h1.content_reads


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http/1.1"])
@pytest.mark.parametrize("name", TLS_PROXIES)
def test_fixed_tls_config_passes_a_client_disconnect_upstream(name: ProxyName, http2: bool, runtime: Runtime,
                                                              upstream: FakeUpstream) -> None:
    """The client hangs up mid-stream (close_notify, then its FIN, as a browser closing a tab): the
    upstream sees its connection close within ~100 ms of the event the client left after (the
    next one is due 500 ms later)."""
    with runtime.run_proxy(fixed_tls(name, upstream.port)) as proxy:
        before = len(upstream.stats.disconnects)
        result = over(proxy.url + "/v1/chat/completions?n=50&interval=0.5", http2=http2,
                      disconnect_after_events=2)
        assert result.http_version == ("2" if http2 else "1.1") and result.outcome == "disconnected", result.error
        assert result.content_events == 2
        wait_until(lambda: len(upstream.stats.disconnects) > before, 2,
                   describe="the upstream to see the disconnect")
        delay = upstream.stats.disconnects[-1]
    assert 0 <= delay < 0.1, f"disconnect reached the upstream {delay * 1000:.0f} ms after its last write"


@pytest.mark.parametrize("name", TLS_PROXIES)
def test_fixed_tls_config_reuses_connections(name: ProxyName) -> None:
    """Five h2 streams, then five requests on one kept-alive HTTP/1.1 TLS connection (as an SDK's
    pool sends them): the client connection is kept, and the upstream's are reused."""
    with fake_upstream() as fresh:
        settings = fixed_tls(name, fresh.port)
        with get_runtime("local").run_proxy(settings):
            for _ in range(5):
                assert over(f"https://{settings.listen_host}:{settings.listen_port}/v1/chat/completions"
                            "?n=2&interval=0").saw_done
            client = http.client.HTTPSConnection(settings.listen_host, settings.listen_port, timeout=10,
                                                 context=tls_context(False, http2=False))
            ports = set()  # the client side's port: one, if the connection was kept
            try:
                for _ in range(5):
                    client.request("POST", "/v1/chat/completions?n=2&interval=0", body=b"{}",
                                   headers={"Content-Type": "application/json"})
                    assert b"[DONE]" in client.getresponse().read()
                    assert client.sock is not None and client.sock.version() in ("TLSv1.2", "TLSv1.3")
                    ports.add(client.sock.getsockname()[1])
            finally:
                client.close()
            assert len(ports) == 1, "the proxy closed a keep-alive TLS connection"
        assert fresh.stats.requests == 10
        # One pool per nginx worker (worker_processes auto: one per core); Envoy runs one worker.
        assert fresh.stats.connections <= min(2, os.cpu_count() or 1), "no upstream keepalive"


def handshake(port: int, version: ssl.TLSVersion) -> str:
    """The TLS version agreed with 127.0.0.1:PORT when the client offers only `version`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.minimum_version = context.maximum_version = version
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # so that this client may offer TLS 1.1 at all
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw) as tls:
            return tls.version() or ""


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")  # offered on purpose
@pytest.mark.parametrize("name", TLS_PROXIES)
def test_fixed_tls_config_refuses_deprecated_tls_versions(name: ProxyName, upstream: FakeUpstream) -> None:
    settings = fixed_tls(name, upstream.port)
    with get_runtime("local").run_proxy(settings):
        assert handshake(settings.listen_port, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
        assert handshake(settings.listen_port, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
        with pytest.raises(ssl.SSLError, match="PROTOCOL_VERSION"):
            handshake(settings.listen_port, ssl.TLSVersion.TLSv1_1)


# Measured, and taught in the configs' comments: when the server is silent after its headers
# (a long prefill), Envoy and nginx 1.30 send the HEADERS frame at once, nginx 1.22 only with the
# first DATA frame (over HTTP/1.1 both nginx send them at once). The server's silence is what is
# measured.
SILENT_AFTER_HEADERS_S = 1.0


@pytest.mark.parametrize(("name", "series", "headers_at_once"), [
    ("envoy", None, True), ("nginx", "1.22", False), ("nginx", "1.30", True)])
def test_headers_frame_when_the_server_is_silent_after_its_headers(
        name: ProxyName, series: str | None, headers_at_once: bool, upstream: FakeUpstream) -> None:
    runtime = get_runtime("local")
    path = f"/silence?k=0&silence={SILENT_AFTER_HEADERS_S}"
    with runtime.run_proxy(fixed_tls(name, upstream.port).with_(version=series)) as proxy:
        h2, h1 = over(proxy.url + path), over(proxy.url + path, http2=False)
    assert (h2.http_version, h1.http_version) == ("2", "1.1")
    assert h2.status == h1.status == 200 and h2.headers_s is not None and h1.headers_s is not None
    assert h2.e2e_s is not None and h2.e2e_s >= 0.9 * SILENT_AFTER_HEADERS_S  # the silence happened
    assert h1.headers_s < 0.25 * SILENT_AFTER_HEADERS_S, "over HTTP/1.1 both send headers at once"
    if headers_at_once:
        assert h2.headers_s < 0.25 * SILENT_AFTER_HEADERS_S
    else:
        assert h2.headers_s >= 0.9 * SILENT_AFTER_HEADERS_S


# ---- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TLS_PROXIES)
def test_a_missing_certificate_is_a_clear_error_before_the_proxy_starts(
        name: ProxyName, runtime: Runtime, upstream: FakeUpstream) -> None:
    """The export as it is, on a machine without /etc/ssl/certs/proxy.pem: the error names the
    setting and the path, and no proxy (nor container) ever starts."""
    settings = on_free_ports(variant(name, "fixed-tls"), upstream.port)
    certificate = next(iter(settings.tls_files()))
    with pytest.raises(CertificateMissing, match=rf"{name} {certificate}: /etc/ssl/certs/proxy.pem "
                                                 "does not exist. Point .* at your PEM file"):
        with runtime.run_proxy(settings):
            pytest.fail("started")
    assert not port_accepts(settings.listen_port)


def test_an_unreadable_key_is_named(tmp_path: Any) -> None:
    certificate, _ = self_signed()
    settings = EnvoySettings(tls_http2=True, certificate_chain=certificate,
                             private_key=str(tmp_path / "missing.key"))
    with pytest.raises(CertificateMissing, match=r"envoy private_key: .*missing\.key does not exist"):
        with get_runtime("local").run_proxy(settings):
            pytest.fail("started")


@pytest.mark.parametrize(("model", "given", "needed"), [
    (NginxSettings, "ssl_certificate", "ssl_certificate_key"),
    (NginxSettings, "ssl_certificate_key", "ssl_certificate"),
    (EnvoySettings, "certificate_chain", "private_key"),
    (EnvoySettings, "private_key", "certificate_chain"),
])
def test_one_file_without_the_other_is_refused(model: type[ProxySettings], given: str, needed: str) -> None:
    with pytest.raises(ValidationError, match=rf"{needed} is needed with {given}"):
        model(tls_http2=True, **{given: self_signed()[0]})


@pytest.mark.parametrize("model", [NginxSettings, EnvoySettings], ids=["nginx", "envoy"])
def test_tls_on_without_files_makes_a_certificate_and_off_reads_none(model: type[ProxySettings]) -> None:
    assert tuple(model(tls_http2=True).tls_files().values()) == self_signed()
    assert model().tls_files() == {}
    assert model().with_(**dict(zip(model.tls_fields, self_signed()))).tls_files() == {}


@pytest.mark.docker
def test_a_container_check_loads_the_certificate_at_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """An image that is not the host's binary (an official one) checks a config in a throwaway
    container: the certificate and key must be mounted there too, or the binary cannot load them."""
    require_images(["nginx"])
    choice = image_for("nginx")
    monkeypatch.setattr(type(choice), "offline", property(lambda self: False))  # check as for any image
    settings = NginxSettings(tls_http2=True)
    text = render(settings)
    with pytest.raises(ConfigInvalid, match="cannot load certificate"):
        check(text, "nginx", choice)
    assert check(text, "nginx", choice, settings.tls_files().values()) == text
