"""`labs probe` against an origin that is not the lab's server: only what a client can see.

A small OpenAI-compatible stub stands in for vLLM or a gateway (loopback only; it frames events
with the lab's fake-upstream helpers, and adds the `/v1/models` list the probe asks for first).
Model `streams` sends one event every 50 ms; `lumps` thinks for 1.5 s, then sends all in one write.
Models `fast` (10 ms apart, 0.2 s) and `slow` (100 ms apart, 2 s) answer close-delimited, as an
HTTP/1.0 origin does, so a real nginx with its default buffering can stand in front of them.
"""
from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Iterator

import pytest

from labs.fakes.shapes import LAST_CHUNK, chunk, chunked, delta, token
from labs.findings import buffering
from labs.probe import probe_path
from tests.labs.probe.chains import chain, urls
from tests.stub_http import serving

EVENTS = 20
CLOSE_DELIMITED = {"fast": 0.01, "slow": 0.1}  # model -> seconds between events


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            models = [{"id": name, "object": "model", "owned_by": "someone-else"}
                      for name in ("streams", "lumps", *CLOSE_DELIMITED)]
            self._send(200, json.dumps({"object": "list", "data": models}).encode(), "application/json")
        else:
            self._send(404, b'{"error": {"message": "not found"}}', "application/json")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert "lab" not in body, "an ordinary request must carry no lab knobs"
        if body["model"] in CLOSE_DELIMITED:
            return self._close_delimited(CLOSE_DELIMITED[body["model"]])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        data = [chunk(delta(token(i))) for i in range(EVENTS)] + [chunk(delta(finish="stop")),
                                                                  chunk("[DONE]")]
        if body["model"] == "lumps":
            time.sleep(1.5)  # pacing: the stub's silence, then one write
            data = [b"".join(data)]
        for piece in data:
            if body["model"] == "streams":
                time.sleep(0.05)  # pacing: one event every 50 ms
            self.wfile.write(chunked(piece))
            self.wfile.flush()
        self.wfile.write(LAST_CHUNK)
        self.wfile.flush()


    def _close_delimited(self, interval_s: float) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        for i in range(EVENTS):
            time.sleep(interval_s)  # pacing: the model's own speed
            self.wfile.write(chunk(delta(token(i))))
            self.wfile.flush()
        self.wfile.write(chunk(delta(finish="stop")) + chunk("[DONE]"))
        self.wfile.flush()


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    with serving(Stub) as url:
        yield url


def test_a_streaming_origin_passes_and_the_canary_checks_say_what_they_need(stub):
    report = probe_path([stub], model="streams")
    assert report.origin == "other" and report.ok and report.findings == []
    by_name = {c.name: c for c in report.checks}
    assert by_name["buffering"].passed and not by_name["buffering"].skipped
    assert by_name["compression-delay"].passed and "did not compress" in by_name["compression-delay"].observed
    for name in ("coalescing", "total-timeout", "idle-timeout-mid-stream", "disconnect-not-propagated",
                 "connection-limit"):
        assert by_name[name].skipped and "needs a canary origin" in by_name[name].skipped
    stream = report.measurements["buffering"]["identity"]
    assert stream["content_events"] == EVENTS and stream["bursts"] >= 0.75 * EVENTS


def test_a_lump_is_only_a_warning_without_a_canary(stub):
    report = probe_path([stub], model="lumps", checks=["buffering"])
    [finding] = report.findings
    assert finding.kind == "buffering" and finding.severity == "warning"
    assert "cannot tell" in finding.reason
    # A warning is not a failure, and a check that saw a lump did not pass: inconclusive (2).
    assert report.verdict == "inconclusive" and report.exit_status == 2 and not report.failures()
    assert report.measurements["buffering"]["identity"]["bursts"] <= 2


def test_a_fast_origin_behind_a_buffering_nginx_is_skipped_never_passed(stub):
    """nginx's defaults (proxy_buffering on, HTTP/1.0 upstream) hold the close-delimited stream; a
    fast origin's 0.2 s stream then arrives early and whole: too short to tell a hop from an origin
    that sends at once. A 2 s stream through the same nginx is still judged (a warning)."""
    direct = probe_path([stub], model="fast", checks=["buffering"])
    by_name = {c.name: c for c in direct.checks}
    # Straight from the origin the fast stream flowed: what nginx changes below is nginx's doing.
    assert by_name["buffering"].passed and direct.exit_status == 0
    assert direct.measurements["buffering"]["identity"]["bursts"] >= EVENTS / buffering.LUMP_EVENTS_PER_READ
    port = int(stub.split(":")[2].split("/")[0])
    with chain([("nginx", "nginx-buffering:broken", {})], port) as hops:
        fast = probe_path(urls(hops), model="fast", checks=["buffering"])
        slow = probe_path(urls(hops), model="slow", checks=["buffering"])
    held = fast.measurements["buffering"]["identity"]
    assert held["content_events"] == EVENTS and held["bursts"] <= 2, held  # nginx held it whole
    [check] = fast.checks
    assert not check.passed and check.skipped and "too short a stream to tell" in check.skipped
    assert fast.findings == [] and fast.skipped() == ["buffering"]
    assert fast.verdict == "inconclusive" and fast.exit_status == 2 and not fast.ok
    # Long enough to tell: the lump is named, as a warning (the pace is a guess).
    [finding] = slow.findings
    assert finding.kind == "buffering" and finding.severity == "warning" and slow.exit_status == 2
    assert slow.measurements["buffering"]["identity"]["e2e_s"] >= buffering.PLAIN_MIN_E2E_S
