"""A WSGI app as Python backends commonly stream an LLM answer: Flask forwards the request with
`requests` and returns a generator over the upstream's body, so each chunk is written when it
arrives. gunicorn runs it (`gunicorn proxies.apps.gunicorn.wsgi_app:app`); the worker class, workers,
threads and timeout are the variants (proxies/apps/gunicorn/settings.py).

    STREAMLAB_UPSTREAM=http://127.0.0.1:8000   where it forwards
"""
from __future__ import annotations

import os
from typing import Iterator

import requests
from flask import Flask, Response, request, stream_with_context

UPSTREAM = os.environ.get("STREAMLAB_UPSTREAM", "http://127.0.0.1:8000")
# What the answer keeps of the upstream's headers (framing and hop-by-hop headers are gunicorn's).
KEPT = ("content-type", "cache-control", "x-accel-buffering")
# How long a silent upstream may keep this app waiting (a heartbeat-less pause is longer than 30 s
# in no lab).
UPSTREAM_READ_TIMEOUT_S = 300

app = Flask(__name__)
session = requests.Session()


@app.route("/v1/<path:path>", methods=["GET", "POST"])
def forward(path: str) -> Response:
    upstream = session.request(
        request.method, f"{UPSTREAM}/v1/{path}", data=request.get_data(),
        headers={"Content-Type": request.headers.get("Content-Type", "application/json")},
        stream=True, timeout=(5, UPSTREAM_READ_TIMEOUT_S))

    def body() -> Iterator[bytes]:
        try:
            # chunk_size=None: each chunk as the upstream's chunked framing delivers it.
            yield from upstream.iter_content(chunk_size=None)
        finally:
            upstream.close()
    headers = {name: upstream.headers[name] for name in KEPT if name in upstream.headers}
    return Response(stream_with_context(body()), status=upstream.status_code, headers=headers)
