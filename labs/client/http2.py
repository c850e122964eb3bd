"""The measuring client over HTTP/2 with TLS (ALPN `h2`), with the `h2` library: the same
StreamResult as over HTTP/1.1 (labs/client/protocol.py), every socket read numbered and timed
where it happens; the HEADERS frame's arrival is `headers_s`, DATA frames feed the same SSE
parser, timed by the read that carried them.

    result = await measure_stream(url, body, http2=True, verify_tls=False)  # labs/client/http1.py
"""
from __future__ import annotations

import ssl
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from labs.client.decoding import decoder_for
from labs.client.protocol import USER_AGENT, Exchange, Options, Target, sent_headers


def tls_context(verify: bool, http2: bool = True) -> ssl.SSLContext:
    """A client context offering only `h2` (or only `http/1.1`). verify=False: the lab's own
    self-signed loopback certificate (made at run time, proxies/tls.py) is accepted."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"] if http2 else ["http/1.1"])
    return context


def request_headers(target: Target, body: bytes, opts: Options) -> list[tuple[str, str]]:
    # A Host the caller names (a virtual host's name) is HTTP/2's :authority, never a second header.
    host = next((v for k, v in (opts.headers or {}).items() if k.lower() == "host"), target.host_header)
    headers = [(":method", "POST"), (":scheme", "https"), (":authority", host),
               (":path", target.path), ("user-agent", USER_AGENT), ("accept", "text/event-stream"),
               ("content-type", "application/json"), ("content-length", str(len(body)))]
    if opts.accept_encoding:
        headers.append(("accept-encoding", opts.accept_encoding))
    taken = {name for name, _ in headers} | {"host"}
    return headers + [(k.lower(), v) for k, v in sent_headers(opts).items() if k.lower() not in taken]


# The events that are the response itself (what TTFB times), not flow control on its stream.
RESPONSE_FRAMES = (h2.events.ResponseReceived, h2.events.DataReceived, h2.events.StreamReset)


class H2Exchange(Exchange):
    """One request on stream 1 of an HTTP/2 connection (Exchange's body handling and outcomes)."""

    STREAM = 1

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                        header_encoding="latin-1"))

    def connection_made(self, transport: object) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        ssl_object = transport.get_extra_info("ssl_object")  # type: ignore[attr-defined]
        self.r.http_version = "2" if ssl_object and ssl_object.selected_alpn_protocol() == "h2" else None
        if self.r.http_version == "2":
            # The connection preface goes first: the server's SETTINGS may arrive before the
            # request is sent, and their ACK must not precede it.
            self.h2.initiate_connection()
            transport.write(self.h2.data_to_send())  # type: ignore[attr-defined]

    def send_request(self, target: Target, body: bytes) -> None:
        if self.r.http_version != "2":
            self.r.error = "the server did not agree to HTTP/2 (ALPN)"
            self._finish("reset")
            return
        self.h2.send_headers(self.STREAM, request_headers(target, body, self.opts))
        self.h2.send_data(self.STREAM, body, end_stream=True)
        self.send(self.h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        now, wall = time.perf_counter(), time.time()
        if self.finished:
            return
        if not self.t0:  # the server's preface, before the request: not part of the response
            self.h2.receive_data(data)
            if self.transport is not None:
                self.transport.write(self.h2.data_to_send())
            return
        r = self.r
        before = r.ttfb_s
        t = self.note_read(now)
        # TTFB is the response's first frame (HEADERS): connection frames (a SETTINGS ack, a
        # WINDOW_UPDATE) a hop sends at once are not the response.
        r.ttfb_s = before
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            r.error = f"HTTP/2 protocol error: {exc}"
            self._finish("reset" if r.status is None else "eof")
            return
        for event in events:
            self._event(event, t, r.reads, wall)
            if self.finished:
                return
        pending = self.h2.data_to_send()
        if pending and self.transport is not None:
            self.transport.write(pending)  # window updates, settings acks

    def _event(self, event: object, t: float, read: int, wall: float) -> None:
        r = self.r
        if r.ttfb_s is None and isinstance(event, RESPONSE_FRAMES):
            r.ttfb_s = t  # not a WINDOW_UPDATE for the stream: nginx sends one on the body
        if isinstance(event, h2.events.ResponseReceived):
            headers = {str(k): str(v) for k, v in event.headers}
            r.status = int(headers.pop(":status"))
            r.headers, r.headers_s = headers, t
            r.content_encoding = headers.get("content-encoding", "").strip().lower() or None
            self.decoder = decoder_for(r.content_encoding)
        elif isinstance(event, h2.events.DataReceived):
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            self._body(event.data, t, read, wall)
        elif isinstance(event, h2.events.StreamEnded):
            r.body_complete = True
            self._finish("end")
        elif isinstance(event, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
            r.error = f"HTTP/2 {type(event).__name__} ({getattr(event, 'error_code', '')!s})"
            self._finish("eof" if r.status is not None else "reset")
