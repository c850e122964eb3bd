"""Slow, silent, huge, pipelining and departing clients against the server's own HTTP limits
(scaled to about a second by flags, see conftest.py): each gets a clear status or is cut, the
server counts it right, and the next client is served with every gauge at 0."""
from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from server.launcher import running_server
from server.processes import wait_until
from tests.reliability.conftest import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    KEEP_ALIVE_S,
    SEND_TIMEOUT_S,
    assert_server_fine,
    gauges_at_zero,
    post,
    status_of,
)

CHAT = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"


def trickle(sock: socket.socket, data: bytes, timeout_s: float) -> None:
    """Send `data` a byte at a time, 20 bytes per `timeout_s`, until the server closes or five
    timeouts have passed (a server without the limit would otherwise take the whole trickle)."""
    start = time.monotonic()
    for byte in data:
        try:
            sock.send(bytes([byte]))
        except OSError:
            return
        time.sleep(timeout_s / 20)  # pacing: the trickle under test
        if time.monotonic() - start > timeout_s * 5:
            return


def chat_request(fields: dict, close: bool = False) -> bytes:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                       **fields}).encode()
    extra = b"Connection: close\r\n" if close else b""
    return CHAT + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


def connect(server, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect(), so the window the server sees is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((server.host, server.port))
    return sock


def read_until(sock: socket.socket, marker: bytes, timeout_s: float = 10.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    sock.settimeout(0.2)
    while marker not in seen and time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        seen += data
    return seen


def read_all(sock: socket.socket, timeout_s: float = 10.0) -> tuple[bytes, float]:
    """Everything until the server closes; and how long that took."""
    start = time.monotonic()
    seen = b""
    sock.settimeout(timeout_s)
    while True:
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not data:
            break
        seen += data
    return seen, time.monotonic() - start


def counter(server, name: str) -> float:
    return server.metrics().get(name, 0.0)


# -- headers and bodies against the limits -------------------------------------------------------

@pytest.fixture(scope="module", params=["httptools", "h11"])
def limited(request, hardened):
    """Each HTTP implementation with the suite's small limits (httptools: the shared server)."""
    if request.param == "httptools":
        yield hardened
        return
    with running_server(["--engine", "synthetic", "--http", request.param,
                         "--header-timeout-s", str(HEADER_TIMEOUT_S),
                         "--body-timeout-s", str(BODY_TIMEOUT_S),
                         "--send-timeout-s", str(SEND_TIMEOUT_S)]) as handle:
        yield handle


def test_a_silent_connection_is_closed_after_the_header_timeout(limited) -> None:
    with connect(limited) as sock:
        seen, took = read_all(sock, timeout_s=HEADER_TIMEOUT_S * 10)
    assert seen == b""
    assert HEADER_TIMEOUT_S * 0.8 <= took < HEADER_TIMEOUT_S * 5, took
    assert_server_fine(limited)


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(hardened) -> None:
    with connect(hardened) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        first = read_until(sock, b'"queued"')
        assert status_of(first) == 200, first[:300]
        rest, took = read_all(sock, timeout_s=KEEP_ALIVE_S * 10)
    assert rest == b""  # closed, nothing more said
    assert KEEP_ALIVE_S * 0.8 <= took < KEEP_ALIVE_S * 5, took


def test_trickled_headers_get_408_after_the_header_timeout(limited) -> None:
    with connect(limited) as sock:
        start = time.monotonic()
        trickle(sock, b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 200, HEADER_TIMEOUT_S)
        seen, _ = read_all(sock)
        status = status_of(seen)
    assert status == 408, seen[:300]
    assert time.monotonic() - start < HEADER_TIMEOUT_S * 5
    assert json.loads(seen.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert_server_fine(limited)


def test_a_huge_trickled_header_block_gets_431_before_it_is_all_sent(limited) -> None:
    with connect(limited) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ")
        try:
            for _ in range(1024):  # up to 1 MB, 1 KB a write, never ending the block
                sock.sendall(b"a" * 1024)
        except OSError:  # the server has answered and closed
            pass
        seen, _ = read_all(sock)
    assert status_of(seen) == 431, seen[:300]
    # Refused as the block grew past the limit, not once it was complete (it never was).
    assert "request header block over 32768 bytes: 431" in limited.log_tail(50)
    assert_server_fine(limited)


@pytest.mark.parametrize(("headers", "why"), [
    ({f"x-h{i}": "v" for i in range(150)}, "fields"),
    ({"x-big": "a" * 40_000}, "bytes"),
])
def test_too_many_or_too_large_headers_get_431(limited, headers, why) -> None:
    reply = post(limited, b"{}", headers)
    assert reply.status == 431, (why, reply.body[:300])
    assert reply.json()["error"]["code"] == "request_headers_too_large"
    assert_server_fine(limited)


def test_a_short_body_gets_408_after_the_body_timeout(limited) -> None:
    with connect(limited) as sock:
        sock.sendall(CHAT + b"Content-Length: 100\r\n\r\n{\"model\": ")
        seen, took = read_all(sock, timeout_s=BODY_TIMEOUT_S * 10)
    assert status_of(seen) == 408, seen[:300]
    assert BODY_TIMEOUT_S * 0.8 <= took < BODY_TIMEOUT_S * 5, took
    assert_server_fine(limited)


def test_a_trickled_body_gets_408_even_while_bytes_keep_coming(limited) -> None:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "x" * 200}]})
    with connect(limited) as sock:
        sock.sendall(CHAT + b"Content-Length: %d\r\n\r\n" % len(body))
        trickle(sock, body.encode(), BODY_TIMEOUT_S)
        seen, _ = read_all(sock)
    assert status_of(seen) == 408, seen[:300]
    assert_server_fine(limited)


def test_a_client_leaving_mid_upload_is_one_log_line_not_a_500(limited) -> None:
    errors_before = counter(limited, 'streamlab_requests_total{status="500"}')
    left_before = counter(limited, 'streamlab_requests_total{status="499"}')
    with connect(limited) as sock:
        sock.sendall(CHAT + b"Content-Length: 1000\r\n\r\n{\"model\": \"tiny\", ")
        time.sleep(0.1)  # pacing: the upload is under way when the client leaves
    wait_until(lambda: counter(limited, 'streamlab_requests_total{status="499"}') == left_before + 1,
               5, describe="the abandoned upload counted as 499")
    assert counter(limited, 'streamlab_requests_total{status="500"}') == errors_before
    log = limited.log_tail(400)
    assert "Traceback" not in log and "Exception in ASGI" not in log, log
    assert "left before its request body was complete" in log
    assert_server_fine(limited)


# -- streams and their clients -----------------------------------------------------------------

def test_a_client_leaving_during_headers_delay_is_a_departure_not_a_200(hardened) -> None:
    ok_before = counter(hardened, 'streamlab_requests_total{status="200"}')
    gone_before = counter(hardened, 'streamlab_requests_aborted_total{reason="disconnect"}')
    with connect(hardened) as sock:
        sock.sendall(chat_request({"stream": True, "lab": {"headers_delay_s": 30}}))
        time.sleep(0.2)  # pacing: inside the silence before the headers
    wait_until(lambda: counter(hardened, 'streamlab_requests_aborted_total{reason="disconnect"}')
               == gone_before + 1, 5, describe="the departure counted")
    assert counter(hardened, 'streamlab_requests_total{status="200"}') == ok_before
    assert_server_fine(hardened)


def test_every_abandoned_stream_is_counted_once(hardened) -> None:
    """Streams left at different points (before the first token, mid-stream, in a pause, while
    a finished answer waits out its coalescing window): one departure each, no more, no less."""
    name = 'streamlab_requests_aborted_total{reason="disconnect"}'
    gone_before = counter(hardened, name)
    shapes = [({"lab": {"first_token_delay_s": 30}}, b"data: ", 0.0),
              ({"lab": {"tokens_per_s": 50}}, b'"content":"', 0.0),
              ({"lab": {"pause_after_tokens": 2, "pause_s": 30}}, b'"content":"', 0.0),
              # Generation is over within the linger; the last frames wait for the window.
              ({"max_tokens": 3, "lab": {"coalesce_ms": 3000}}, b"\r\n\r\n", 0.5)]
    for i in range(12):
        fields, marker, linger_s = shapes[i % len(shapes)]
        with connect(hardened) as sock:
            sock.sendall(chat_request({"stream": True, **fields}))
            read_until(sock, marker)
            time.sleep(linger_s)  # pacing: where in the stream the client leaves
    wait_until(lambda: counter(hardened, name) >= gone_before + 12, 10,
               describe="twelve departures counted")
    gauges_at_zero(hardened)
    assert counter(hardened, name) == gone_before + 12


def test_pipelined_streams_both_see_their_client_leave(limited) -> None:
    """Two day-long streams pipelined on one connection, heartbeats off (nothing is written that
    could fail): the client leaves during the first; both slots come back, nothing is a 500."""
    errors_before = counter(limited, 'streamlab_requests_total{status="500"}')
    gone_before = counter(limited, 'streamlab_requests_aborted_total{reason="disconnect"}')
    held = {"stream": True, "lab": {"pause_after_tokens": 1, "pause_s": 86_400,
                                    "heartbeat_s": 0}}
    with connect(limited) as sock:
        sock.sendall(chat_request(held))
        seen = read_until(sock, b'"content":"')
        assert status_of(seen) == 200, seen[:300]
        wait_until(lambda: limited.metrics().get("streamlab_active_streams") == 1, 5,
                   describe="the first stream in its pause")
        # The second arrives while the first streams: uvicorn parks it and stops reading.
        sock.sendall(chat_request(held))
        time.sleep(0.2)  # pacing: the second request is parsed and parked before the client leaves
    gauges_at_zero(limited, timeout_s=5)
    assert counter(limited, 'streamlab_requests_aborted_total{reason="disconnect"}') == \
        gone_before + 1
    assert counter(limited, 'streamlab_requests_total{status="500"}') == errors_before
    assert_server_fine(limited)


def test_pipelined_requests_are_still_answered_in_order(limited) -> None:
    with connect(limited) as sock:
        sock.sendall(chat_request({"stream": True, "max_tokens": 3})
                     + chat_request({"stream": False, "max_tokens": 3})
                     + chat_request({"stream": True, "max_tokens": 3}, close=True))
        seen, _ = read_all(sock)
    assert seen.count(b"HTTP/1.1 200 OK") == 3, seen[:600]
    assert seen.count(b"data: [DONE]") == 2 and seen.count(b'"object":"chat.completion"') == 1
    assert_server_fine(limited)


# Every chunk names the model: a 6 KB name makes a 2,000-token answer ~12 MB, more than the
# kernel's socket buffers (4 MB send, the reader's small window) and uvicorn's can hold.
LONG_NAME = "a-model-with-a-very-long-name-" * 200


PAGE = "http://page.example"


@pytest.fixture(scope="module")
def wordy(model_dir):
    """A server with a long model name, which also lets one web page in (CORS)."""
    with running_server(["--engine", "synthetic", "--served-model-name", LONG_NAME,
                         "--send-timeout-s", str(SEND_TIMEOUT_S), "--cors-origin", PAGE]) as handle:
        yield handle


def test_a_reader_that_stops_reading_is_cut_and_its_slot_freed(wordy) -> None:
    """A long, fast stream to a client that never reads (a tiny receive window): the write
    blocks, and after --send-timeout-s the server aborts the stream and frees the slot."""
    name = 'streamlab_requests_aborted_total{reason="stalled-client"}'
    stalled_before = counter(wordy, name)
    sock = connect(wordy, rcvbuf=4096)
    try:
        sock.sendall(chat_request({"model": LONG_NAME, "stream": True}))
        wait_until(lambda: counter(wordy, name) == stalled_before + 1, SEND_TIMEOUT_S * 15,
                   describe="the stalled reader cut")
        gauges_at_zero(wordy, timeout_s=SEND_TIMEOUT_S * 5)
        # It was cut mid-answer: what it can still read ends without [DONE].
        seen, _ = read_all(sock, timeout_s=5)
        assert seen.startswith(b"HTTP/1.1 200") and b"data: [DONE]" not in seen
    finally:
        sock.close()
    assert "a write blocked for 1 s on a client that does not read" in wordy.log_tail(50)
    body = json.dumps({"model": LONG_NAME, "stream": True, "max_tokens": 3,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    reply = post(wordy, body)
    assert reply.status == 200 and reply.body.rstrip().endswith(b"data: [DONE]")


# -- browsers -----------------------------------------------------------------------------------

def test_cors_is_off_unless_configured(hardened, wordy) -> None:
    def ask(server, model: str, origin: str):
        return post(server, json.dumps({"model": model, "max_tokens": 1, "messages": [
            {"role": "user", "content": "hi"}]}).encode(), {"Origin": origin})

    plain = ask(hardened, "tiny", PAGE)
    assert plain.status == 200 and "access-control-allow-origin" not in plain.headers
    allowed = ask(wordy, LONG_NAME, PAGE)
    assert allowed.status == 200
    assert allowed.headers["access-control-allow-origin"] == PAGE
    other = ask(wordy, LONG_NAME, "http://elsewhere.example")
    assert "access-control-allow-origin" not in other.headers


def test_a_configured_origin_passes_the_preflight_and_others_do_not(wordy) -> None:
    def preflight(origin: str) -> tuple[int, dict[str, str]]:
        conn = http.client.HTTPConnection(wordy.host, wordy.port, timeout=10)
        try:
            conn.request("OPTIONS", "/v1/chat/completions", headers={
                "Origin": origin, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, x-lab-token"})
            response = conn.getresponse()
            response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}
        finally:
            conn.close()

    status, headers = preflight(PAGE)
    assert status == 200 and headers["access-control-allow-origin"] == PAGE
    assert "x-lab-token" in headers["access-control-allow-headers"].lower()
    status, headers = preflight("http://elsewhere.example")
    assert status == 400 and "access-control-allow-origin" not in headers
