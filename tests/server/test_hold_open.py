"""`error_mode: hold-open` on every protocol: the protocol's failure event, then silence with the
socket open (no heartbeat, no end of the body) until the client leaves, whose departure then ends
the stream; `inband` ends the body right after the same event. Read over a raw socket, so that
the client leaves only when the test says so."""
from __future__ import annotations

import json
import socket

import pytest

from server.processes import wait_until
from tests.server import raw_http

SILENCE_S = 0.6  # how long the client waits after the failure event
HEARTBEAT_S = SILENCE_S / 6  # several would fall in the silence if the server sent any
CASES = {
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
             b'data: {"error":'),
    "responses": ("/v1/responses", {"input": "hi"}, b"event: response.failed"),
    "messages": ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}],
                                  "max_tokens": 50}, b"event: error"),
}
END_OF_BODY = b"\r\n0\r\n\r\n"  # the chunked body's last chunk


def request(api: str, mode: str) -> bytes:
    path, fields, _ = CASES[api]
    body = {"model": "tiny", "stream": True, **fields,
            "lab": {"script": "one two three four five", "error_after_tokens": 3,
                    "error_mode": mode, "heartbeat_s": HEARTBEAT_S}}
    return raw_http.post(path, json.dumps(body).encode(), {"anthropic-version": "2023-06-01"})


def read_past(sock: socket.socket, marker: bytes) -> bytes:
    """Everything up to the end of the event that holds `marker`."""
    received = b""
    while marker not in received or b"\n\n" not in received[received.index(marker):]:
        piece = sock.recv(65536)
        assert piece, f"the connection closed before {marker!r}"
        received += piece
    return received


def rest_within(sock: socket.socket, seconds: float) -> bytes:
    """What arrives within `seconds` (the body's end, a heartbeat, ...)."""
    sock.settimeout(seconds)
    received = b""
    try:
        while not received.endswith(END_OF_BODY):
            piece = sock.recv(65536)
            if not piece:
                break
            received += piece
    except TimeoutError:
        pass
    return received


@pytest.mark.parametrize("api", list(CASES))
def test_hold_open_keeps_the_socket_silent_until_the_client_leaves(server, api):
    marker = CASES[api][2]
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(request(api, "hold-open"))
        before = read_past(sock, marker)
        after = before[before.index(marker):].split(b"\n\n", 1)[1]
        after += rest_within(sock, SILENCE_S)
        # Nothing after the failure event (no heartbeat, no [DONE], no end of the body), and
        # the server still holds the stream.
        assert after in (b"", b"\r\n") and server.metrics()["streamlab_active_streams"] >= 1
    wait_until(lambda: server.metrics()["streamlab_active_streams"] == 0, 5, interval_s=0.02,
               describe="the stream ended after the client left")
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(request(api, "inband"))
        whole = read_past(sock, marker)
        if not whole.endswith(END_OF_BODY):  # in the same write as the failure event, or after
            whole += rest_within(sock, SILENCE_S)
        assert whole.endswith(END_OF_BODY)
