"""The fake upstream itself: bad requests get clear answers, knobs come from the query or `lab`."""
from __future__ import annotations

import asyncio
import http.client
import socket

from labs.client import measure_stream
from labs.fakes.shapes import script
from labs.fakes.upstream import FakeUpstream
from server.processes import wait_until
from tests.labs.conftest import BODY


def _get(upstream: FakeUpstream, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_an_unknown_shape_is_a_404_that_lists_the_shapes(upstream: FakeUpstream) -> None:
    status, body = _get(upstream, "/lumpy")
    assert status == 404 and b"/lumpy" in body and b"/paced" in body and b"/holdback" in body


def test_a_knob_that_is_not_a_number_is_a_400_naming_it(upstream: FakeUpstream) -> None:
    status, body = _get(upstream, "/paced?n=many")
    assert status == 400 and b"n='many'" in body


def test_lab_knobs_in_the_body_drive_it_like_the_server(upstream: FakeUpstream) -> None:
    body = {**BODY, "lab": {"headers_delay_s": 0.2, "stamp": True}}
    r = asyncio.run(measure_stream(upstream.url("/v1/chat/completions?n=3&interval=0.01"), body))
    assert r.outcome == "complete" and r.text == script(3)
    assert r.ttfb_s >= 0.2 * 0.9  # the silence before the headers came from `lab`
    assert len(r.hop_delays) == 5  # role, 3 tokens and finish stamped; [DONE] is not


def test_http10_requests_get_a_close_delimited_body(upstream: FakeUpstream) -> None:
    with socket.create_connection(("127.0.0.1", upstream.port), timeout=5) as sock:
        sock.sendall(b"GET /paced?n=2&interval=0 HTTP/1.0\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):  # ends with the server's close
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"transfer-encoding" not in head.lower()
    assert body.endswith(b"data: [DONE]\n\n")


def test_keep_alive_serves_several_requests_on_one_connection(upstream: FakeUpstream) -> None:
    before = upstream.stats.connections
    conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=5)
    try:
        for _ in range(3):
            conn.request("POST", "/paced?n=2&interval=0", body=b"{}")
            assert conn.getresponse().read().endswith(b"data: [DONE]\n\n")
    finally:
        conn.close()
    assert upstream.stats.connections == before + 1


def test_a_client_that_leaves_mid_stream_is_seen_at_once(upstream: FakeUpstream) -> None:
    before = len(upstream.stats.disconnects)
    r = asyncio.run(measure_stream(upstream.url("/paced?n=20&interval=0.5"), BODY, disconnect_after_events=1))
    assert r.outcome == "disconnected"
    wait_until(lambda: len(upstream.stats.disconnects) > before, 2, describe="the fake to see the close")
    assert upstream.stats.disconnects[-1] < 0.25  # well before the next event was due (0.5 s)


def test_the_content_type_knob_sets_the_header_only_and_refuses_what_is_not_a_type(upstream: FakeUpstream) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=5)
    try:
        conn.request("GET", "/paced?n=2&interval=0.01&content_type=text/plain;%20charset=utf-8")
        response = conn.getresponse()
        typed, body = response.getheader("content-type"), response.read()
    finally:
        conn.close()
    assert typed == "text/plain; charset=utf-8" and body.count(b"data: {") == 4  # role, 2 tokens, finish
    status, said = _get(upstream, "/paced?content_type=text/plain%0d%0aX-Evil:%201")
    assert status == 400 and b"content_type" in said
