"""Node's built-in `fetch` as a measured client: proxies/apps/node/fetch-client.mjs reads the stream
with `for await (const chunk of response.body)` and prints each chunk as one JSON line; this side
times each line as it arrives and parses the events, as the other library clients do.

`body_timeout_s` sets undici's `bodyTimeout` (the longest silence between two body chunks) through
an npm `undici` Agent passed as fetch's `dispatcher`; None keeps Node's default dispatcher (300 s).
"""
from __future__ import annotations

import base64
import json
import time
from contextlib import closing
from typing import Any, Mapping

from labs.client.sse import SSEParser
from labs.client.node_process import json_lines
from proxies.apps.nodejs import NODE_DIR

SCRIPT = NODE_DIR / "fetch-client.mjs"


class NodeFetchError(RuntimeError):
    """What the Node app caught, named as Node names it (`TypeError: terminated`)."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.js_name = str(record.get("error") or "Error")
        self.code = record.get("code")
        detail = ", ".join(str(part) for part in (self.code, record.get("cause")) if part)
        # As Node prints it: `TypeError: terminated (UND_ERR_BODY_TIMEOUT, Body Timeout Error)`.
        self.shown = f"{self.js_name}: {record.get('message')}" + (f" ({detail})" if detail else "")
        # undici's UND_ERR_BODY_TIMEOUT and UND_ERR_HEADERS_TIMEOUT
        self.is_timeout = str(self.code or "").endswith("TIMEOUT")
        super().__init__(self.shown)


def stream(url: str, body: Mapping[str, Any], headers: Mapping[str, str], record: Any,
           body_timeout_s: float | None = None) -> None:
    args = [url, json.dumps(body), json.dumps(dict(headers))]
    if body_timeout_s is not None:
        args.append(str(round(body_timeout_s * 1000)))
    parser = SSEParser()
    # closing: an error raised mid-stream ends the Node process now, not when its frame is freed.
    with closing(json_lines(SCRIPT, args)) as lines:
        for item in lines:
            if "ready" in item:
                record.t0 = time.perf_counter()  # Node has started: the request goes now
            elif "response" in item:
                record.response(int(item["response"]), item.get("headers") or {})
            elif "chunk" in item:
                chunk = base64.b64decode(item["chunk"])
                record.chunks += 1
                record.result.body_bytes += len(chunk)
                record.parsed(parser, chunk)
            elif "error" in item:
                raise NodeFetchError(item)
