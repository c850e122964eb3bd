"""A Locust user that opens one streaming chat completion and reports it under the lab's metric
definitions (docs/metrics.md), as Locust request events, so Locust's web UI, CSV files and its
master/worker aggregation show them:

    request_type SSE, name TTFT            first content event after the request (ms)
    request_type SSE, name gap             each gap between two content events (ms)
    request_type SSE, name E2E             the whole stream; a failure unless it saw [DONE];
                                           response_length = content events
    request_type SSE, name outcome: KIND   one per stream: complete, http-error, reset, ...

    request_type SSE, name connect         from the call to the connection being open (ms):
                                           address lookup and TCP (and TLS) connect

Events are parsed by the lab's SSE parser (labs/client/sse.py): the same rules as the lab's own
client, so a role-only delta never counts as a first token. As in the lab's client, t = 0 is the
request's write, right after its connection opened (the connection class below stamps it): the
address lookup and the connect are `connect`, not TTFT. They are worth keeping apart: gevent
resolves names in a thread pool, and under a few hundred streams per worker a lookup of even
`127.0.0.1` waited 90-140 ms for the GIL (measured here), which a TTFT from the call counted as
the path's. A socket read is not numbered (the lab's client numbers them).

Each user sends one stream and then idles, so `-u N` is N concurrent streams; the master quits
as soon as N streams have been reported (`--run-time` bounds it anyway). On one machine
`python -m labs load URL --locust --workers N` runs the master and workers for you; across
machines (the body comes from `python -m labs load URL --print-body`):

    locust -f labs/load/locustfile.py --master --headless -u 5000 -r 500 --expect-workers 8 \\
        --host http://ENTRY:PORT --stream-body "$(cat body.json)" --stream-spread 1 --csv out
    locust -f labs/load/locustfile.py --worker --master-host MASTER   # on each client machine
"""
from __future__ import annotations

import os
import random
import time
from typing import Any

import gevent
import locust.runners
import requests
from locust import User, constant, events, task
from locust.runners import MasterRunner, WorkerRunner
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from labs.client.sse import SSEParser, classify

# Workers report every second, not every 3 s: the master sees the last streams end sooner.
locust.runners.WORKER_REPORT_INTERVAL = 1.0
KIND = "SSE"
READ_TIMEOUT_S = 30.0  # the lab client's read timeout of a load step


@events.init_command_line_parser.add_listener
def _arguments(parser: Any) -> None:
    parser.add_argument("--stream-path", default="/v1/chat/completions",
                        help="where the streaming POST goes, below --host")
    parser.add_argument("--stream-body", default="", help="the JSON body of every stream")
    parser.add_argument("--lab-token-env", default="STREAMLAB_LAB_TOKEN",
                        help="environment variable holding the canary's lab token (X-Lab-Token)")
    parser.add_argument("--api-key-env", default="", help="environment variable holding the API key")
    parser.add_argument("--stream-deadline", type=float, default=60.0,
                        help="seconds a stream may take in all before it counts as a timeout")
    parser.add_argument("--stream-spread", type=float, default=0.0,
                        help="seconds over which each user's start is spread at random: Locust "
                             "starts users in batches of floor(spawn rate) once a second, so a "
                             "ramp is a burst per second unless its starts are spread (0: none)")


class _StampsConnect:
    """A urllib3 connection that notes when it opened: the request is written right after."""

    connected_at: float | None = None

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.connected_at = time.perf_counter()


class _StampedHTTPConnection(_StampsConnect, HTTPConnection):
    pass


class _StampedHTTPSConnection(_StampsConnect, HTTPSConnection):
    pass


class _StampedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _StampedHTTPConnection


class _StampedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _StampedHTTPSConnection


class StampedAdapter(HTTPAdapter):
    """requests' adapter with connections that note when they opened."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _StampedHTTPPool,
                                                   "https": _StampedHTTPSPool}


def _opened_at(response: requests.Response, called: float) -> float:
    """When the response's connection opened (t = 0), or the call for a reused connection."""
    connection = getattr(response.raw, "connection", None)
    opened = getattr(connection, "connected_at", None)
    return opened if opened is not None and opened >= called else called


class OutcomeError(Exception):
    """A stream that did not complete, named by the lab's outcome kind."""


def _headers(options: Any) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    token = os.environ.get(options.lab_token_env or "", "")
    if token:
        headers["X-Lab-Token"] = token
    key = os.environ.get(options.api_key_env or "", "") if options.api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _transport_outcome(exc: Exception, got_headers: bool) -> str:
    text = str(exc).lower()
    if isinstance(exc, requests.Timeout):
        return "timeout"
    if "refused" in text and not got_headers:
        return "connect-error"
    if "reset" in text or "aborted" in text or "broken pipe" in text or not got_headers:
        return "reset"
    return "truncated"


class StreamingUser(User):
    """One stream per user; `-u N` concurrent users are N concurrent streams."""

    wait_time = constant(0)

    def on_start(self) -> None:
        options = self.environment.parsed_options
        self.url = (self.host or "").rstrip("/") + options.stream_path
        self.body = options.stream_body.encode()
        self.headers = _headers(options)
        self.deadline_s = options.stream_deadline
        self.session = requests.Session()
        self.session.mount("http://", StampedAdapter())
        self.session.mount("https://", StampedAdapter())
        self.done = False

    @task
    def stream(self) -> None:
        if self.done:
            gevent.sleep(1.0)
            return
        self.done = True
        spread = self.environment.parsed_options.stream_spread
        if spread > 0:  # even out the once-a-second batch this user was started in
            gevent.sleep(random.uniform(0.0, spread))
        self.measure()

    def measure(self) -> None:
        content: list[float] = []
        outcome, detail, status, saw_done = "truncated", "", None, False
        got_headers = False
        called = t0 = time.perf_counter()
        try:
            with gevent.Timeout(self.deadline_s, requests.Timeout("stream deadline")):
                response = self.session.post(self.url, data=self.body, headers=self.headers,
                                             stream=True, timeout=(10.0, READ_TIMEOUT_S))
                t0 = _opened_at(response, called)
                got_headers, status = True, response.status_code
                if status >= 400:
                    outcome, detail = "http-error", f"HTTP {status} {response.text[:120]!r}"
                else:
                    parser = SSEParser()
                    for chunk in response.iter_content(chunk_size=None):
                        t = time.perf_counter() - t0
                        for item, payload, _ in parser.feed(chunk):
                            if item != "data":
                                continue
                            kind, text, _, _, _ = classify(payload)
                            if kind == "content":
                                content.append(t)
                            elif kind == "error":
                                outcome, detail = "error-in-band", text[:120]
                            saw_done |= kind == "done"
                    if saw_done and outcome != "error-in-band":
                        outcome = "complete"
                response.close()
        except (requests.RequestException, OSError) as exc:
            outcome, detail = _transport_outcome(exc, got_headers), f"{type(exc).__name__}: {exc}"[:160]
            if saw_done:
                outcome = "complete"
        e2e_ms = (time.perf_counter() - t0) * 1e3
        self.report(content, outcome, detail, e2e_ms, (t0 - called) * 1e3)

    def report(self, content: list[float], outcome: str, detail: str, e2e_ms: float,
               connect_ms: float) -> None:
        fire = self.environment.events.request.fire
        if connect_ms > 0:
            fire(request_type=KIND, name="connect", response_time=connect_ms, response_length=0,
                 exception=None, context={})
        if content:
            fire(request_type=KIND, name="TTFT", response_time=content[0] * 1e3,
                 response_length=0, exception=None, context={})
        for a, b in zip(content, content[1:]):
            fire(request_type=KIND, name="gap", response_time=(b - a) * 1e3, response_length=0,
                 exception=None, context={})
        failure = None if outcome == "complete" else OutcomeError(f"{outcome}: {detail}")
        fire(request_type=KIND, name="E2E", response_time=e2e_ms, response_length=len(content),
             exception=failure, context={})
        fire(request_type=KIND, name=f"outcome: {outcome}", response_time=e2e_ms,
             response_length=len(content), exception=None, context={})


def _quit_when_all_reported(environment: Any) -> None:
    """On the master: once every user's stream is in the stats, stop the run."""
    target = environment.parsed_options.num_users or 0
    while True:
        gevent.sleep(0.25)
        entry = environment.runner.stats.entries.get(("E2E", KIND))
        if target and entry is not None and entry.num_requests >= target:
            environment.runner.quit()
            return


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        gevent.spawn(_quit_when_all_reported, environment)
    elif not isinstance(environment.runner, WorkerRunner) and environment.parsed_options.headless:
        gevent.spawn(_quit_when_all_reported, environment)  # a single process, no workers

