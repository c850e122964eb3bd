"""By hand: the fixed Caddy after a chunked prompt over its limit, then two ordinary streams, in
front of the lab's server (issue 40: an independent check saw both streams answered 502 at once;
not reproduced here, docs/proxies.md#slow-and-huge-request-bodies-every-fixed-config says what was tried).

    .venv/bin/python -m tests.reliability.caddy_after_upload [--runtime docker] [--runs 3]
        [--expect] [--body-bytes N] [--chunk-bytes N] [--set flush_interval=-1]
        [--server-arg=--http --server-arg=h11] [--upload-header X-Request-Id=1]

The exported Caddyfile on free ports (its own timeouts), the server with the suite's flags
(tests/reliability/proxy_faults.SERVER_ARGS) plus --server-arg. --expect: the upload asks
`Expect: 100-continue` and waits for the interim answer before its body (as curl does).
--server-arg=--http --server-arg=h11 or --upload-header X-Request-Id=1 send the chat POST the
ASGI way (server/http/fast_lane.py); --server-arg=--max-body-bytes --server-arg=N puts the server's
own limit below Caddy's, so the server answers the upload itself. Each run prints the upload's
answer, the statuses in Caddy's access log, what the server counted,
each stream, and Caddy's error-level log lines (a 502 names its upstream error there).
Exit 1 if a stream did not complete. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Iterator

import httpx

from proxies import variant
from proxies.fixed_settings import MAX_BODY
from proxies.runtime import get_runtime
from proxies.runtime.base import RunningProxy
from tests.reliability.proxy_faults import SERVER_ARGS, chat
from tests.runtimes import on_free_ports, stream
from tests.server import raw_http

PATH = "/v1/chat/completions"
TOKENS = 20  # each stream: 20 tokens at 50 per second, as the guard's (test_hostile_bodies.py)


def prompt(size: int) -> bytes:
    head, tail = b'{"model": "tiny", "stream": true, "messages": [{"role": "user", "content": "', b'"}]}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def pieces(body: bytes, size: int) -> Iterator[bytes]:
    return (body[start:start + size] for start in range(0, len(body), size))


def upload(proxy: RunningProxy, body: bytes, chunk: int, expect: bool, headers: dict[str, str]) -> str:
    """The chunked upload; its answer as `STATUS` or `cut (why)`."""
    if not expect:
        try:
            return str(httpx.post(proxy.url + PATH, content=pieces(body, chunk), timeout=60,
                                  headers={"content-type": "application/json", **headers}).status_code)
        except httpx.TransportError as exc:
            return f"cut ({exc!r})"
    # The Host with the port: Caddy's site log (access.log) takes only requests for its address.
    head = raw_http.request_head("POST", PATH, {"Content-Type": "application/json", "Transfer-Encoding": "chunked",
                                                "Expect": "100-continue", **headers},
                                 host=f"127.0.0.1:{proxy.settings.listen_port}")
    with raw_http.connection(proxy.settings.listen_port, timeout_s=60) as conn:
        try:
            conn.send(head)
            interim = conn.interim()  # Caddy's 100 Continue (the server's may follow, passed on)
            conn.send(raw_http.chunked(list(pieces(body, chunk))))
        except OSError as exc:
            return f"cut while sending ({exc!r})"
        try:
            return f"{interim}, then {conn.response().status}"
        except Exception as exc:  # http.client's and the socket's: the answer is what is reported
            return f"{interim}, then cut ({exc!r})"


def counted(server: Any) -> dict[str, float]:
    return {key: value for key, value in server.metrics().items() if key.startswith("streamlab_requests_total{")}


def one_run(args: argparse.Namespace, changes: dict[str, Any], headers: dict[str, str]) -> bool:
    runtime = get_runtime(args.runtime)
    with runtime.run_server([*SERVER_ARGS, *args.server_arg]) as server:
        with runtime.run_proxy(on_free_ports(variant("caddy", "fixed"), server.port).with_(**changes)) as proxy:
            before = counted(server)
            answer = upload(proxy, prompt(args.body_bytes), args.chunk_bytes, args.expect, headers)
            results = [stream(proxy.url + PATH, chat(max_tokens=TOKENS, tokens_per_s=50)) for _ in range(2)]
            after = counted(server)
            entries = [json.loads(line) for line in proxy.access_log()]
            errors = [line for line in proxy.error_log().splitlines() if '"level":"error"' in line]
    server_saw = {key.split('"')[1]: after[key] - before.get(key, 0) for key in after
                  if after[key] != before.get(key, 0)}
    print(f"upload: {answer}; Caddy logged {[entry.get('status') for entry in entries]}; "
          f"the server counted {server_saw}")
    for result in results:
        print(f"  stream: {result.status} {result.outcome}, {result.content_events} events"
              + (f" ({result.error})" if result.error else ""))
    for line in errors:
        print(f"  caddy: {line}")
    return all(r.status == 200 and r.outcome == "complete" and r.content_events == TOKENS for r in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=("local", "docker"), default="local")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--expect", action="store_true")
    parser.add_argument("--body-bytes", type=int, default=MAX_BODY + 1024 * 1024)
    parser.add_argument("--chunk-bytes", type=int, default=65536)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--upload-header", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    changes = dict(pair.split("=", 1) for pair in args.set)  # pydantic reads "-1", "300s", "8388608"
    headers = dict(pair.split("=", 1) for pair in args.upload_header)
    served = [one_run(args, changes, headers) for _ in range(args.runs)]
    print(f"{sum(served)} of {len(served)} runs: both streams complete")
    return 0 if all(served) else 1


if __name__ == "__main__":
    raise SystemExit(main())
