"""GaugePeaks against a stub /metrics: the highest value seen, over one connection, failures skipped."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from labs.client.peaks import GaugePeaks
from server.processes import wait_until


class Metrics(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the server's own /metrics
    values = [3.0, 7.0, 5.0]  # the gauge rises and falls: the peak is the middle one
    scrapes = 0
    connections: set[int] = set()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        cls = type(self)
        value = cls.values[min(cls.scrapes, len(cls.values) - 1)]
        cls.scrapes += 1
        cls.connections.add(self.client_address[1])
        body = (f"# TYPE streamlab_active_streams gauge\nstreamlab_active_streams {value}\n"
                'streamlab_requests_total{status="200"} 99.0\n').encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics() -> Iterator[ThreadingHTTPServer]:
    Metrics.scrapes, Metrics.connections = 0, set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_the_peak_over_one_kept_alive_connection(metrics: ThreadingHTTPServer) -> None:
    port = metrics.server_address[1]
    with GaugePeaks("127.0.0.1", port, ["streamlab_active_streams", "process_open_fds"], 0.01) as peaks:
        assert Metrics.scrapes == 1  # the first sample is taken on entry, before the workload
        wait_until(lambda: Metrics.scrapes >= 4, 10, describe="four scrapes")
    assert peaks.peaks == {"streamlab_active_streams": 7.0}  # a gauge never served is absent
    assert len(Metrics.connections) == 1 and peaks.failed == 0


def test_nothing_asked_nothing_scraped(metrics: ThreadingHTTPServer) -> None:
    with GaugePeaks("127.0.0.1", metrics.server_address[1], [], 0.01) as peaks:
        pass
    assert Metrics.scrapes == 0 and peaks.peaks == {}


def test_a_server_that_does_not_answer_is_counted_not_raised() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    port = server.server_address[1]
    server.server_close()  # nothing listens there any more
    with GaugePeaks("127.0.0.1", port, ["streamlab_active_streams"], 0.01) as peaks:
        wait_until(lambda: peaks.failed >= 2, 10, describe="two failed scrapes")
    assert peaks.peaks == {} and peaks.samples == 0
