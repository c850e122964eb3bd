"""By hand: caddyserver/caddy#5431 (Caddy cutting a streaming POST after its first bytes) through
the fixed Caddy of one release (or its defaults: a bare reverse_proxy), with its buffering of
sized bodies or without it.

    .venv/bin/python -m tests.reliability.caddy_post_race [--proxy-version 2.6] [--runs 300]
        [--variant defaults] [--set buffer_requests=false] [--set encode=gzip]

Sequential streaming POSTs through one httpx client, as an SDK sends them (a Content-Length), in
front of the synthetic server (tests/reliability/proxy_faults.SERVER_ARGS): a 600-byte first event,
20 tokens at 400 per second. Prints how many ended without their [DONE] (a 200 cut mid-answer)
and how many of Caddy's error lines name `use of closed network connection`. Not part of the suite.
"""
from __future__ import annotations

import argparse
from typing import Any

import httpx

from proxies import variant
from proxies.kinds import KINDS
from proxies.runtime.local import LocalRuntime
from tests.reliability.proxy_faults import SERVER_ARGS, chat
from tests.runtimes import on_free_ports

PATH = "/v1/chat/completions"
TOKENS = 20
FIRST_EVENT_BYTES = 600  # above encode's minimum_length: with encode on, the race's other side
CLOSED = "use of closed network connection"


def one_stream(client: httpx.Client, url: str) -> bool:
    """Whether the stream arrived whole (its [DONE] read)."""
    body: dict[str, Any] = chat(max_tokens=TOKENS, tokens_per_s=400, pad_bytes=FIRST_EVENT_BYTES)
    try:
        with client.stream("POST", url + PATH, json=body) as response:
            return response.status_code == 200 and "data: [DONE]" in list(response.iter_lines())
    except httpx.TransportError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-version", help="Caddy's release (default: the current one)")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--variant", choices=("fixed", "defaults"), default="fixed")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    release = KINDS["caddy"].release(args.proxy_version)
    changes: dict[str, Any] = dict(pair.split("=", 1) for pair in args.set)
    if "encode" in changes:  # pydantic reads a tuple of names
        changes["encode"] = tuple(changes["encode"].split(","))
    runtime = LocalRuntime()
    with runtime.run_server(SERVER_ARGS) as server:
        settings = on_free_ports(variant("caddy", args.variant), server.port).with_(version=release.series, **changes)
        with runtime.run_proxy(settings) as proxy, httpx.Client(timeout=30) as client:
            whole = sum(one_stream(client, proxy.url) for _ in range(args.runs))
            closed = sum(CLOSED in line for line in proxy.error_log().splitlines())
    print(f"Caddy {release.installed_version() or release.series} ({release.source}), {args.variant}, "
          f"buffer_requests={settings.buffer_requests}, encode={','.join(settings.encode) or 'off'} "
          f"(event streams kept out: {settings.encode_skip_event_streams}): "
          f"{args.runs - whole} of {args.runs} streams cut; "
          f"{closed} error lines name '{CLOSED}'")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
