"""Count, by hand, the streams a proxy's fixed config ends with a 200 just after their headers
(labs/verify/early_cut.py), in front of the lab's server as verify runs it.

    .venv/bin/python -m tests.verify.count_early_cuts [--proxy traefik] [--streams 3000]
        [--headers-delay 0.02] [--set fast_proxy=false]

Each stream is verify's shape, shorter: 12 tokens at 100 tokens/s, 4 streams at a time, one
prompt each. --headers-delay: the server holds its response headers this long (0: it answers as
soon as it has read the request, as verify's server and most servers do). --set: a setting of the
fixed config changed (a YAML value: `fast_proxy=false` runs Traefik's default Go proxy). Not part of
the test suite (1,000 streams take ~30 s).
"""
from __future__ import annotations

import argparse
import asyncio
import time

import yaml

from labs.client.http1 import measure_stream
from labs.lab.server import served_model
from labs.verify.early_cut import early_cut
from labs.verify.run import server_args
from server.launcher import running_server
from tests.labs.probe.chains import chain

AT_ONCE = 4


async def count(url: str, model: str, streams: int, headers_delay_s: float) -> tuple[int, list[str]]:
    gate = asyncio.Semaphore(AT_ONCE)
    cuts, other = 0, []

    async def one(i: int) -> None:
        nonlocal cuts
        body = {"model": model, "messages": [{"role": "user", "content": f"Stream {i}"}], "stream": True,
                "max_tokens": 12, "lab": {"tokens_per_s": 100, "headers_delay_s": headers_delay_s,
                                          "omit_headers": ["X-Accel-Buffering"]}}
        async with gate:
            result = await measure_stream(url + "/v1/chat/completions", body, accept_encoding=None)
        if early_cut(result):
            cuts += 1
        elif result.outcome != "complete":
            other.append(f"{result.outcome} {result.status}")
    await asyncio.gather(*(one(i) for i in range(streams)))
    return cuts, other


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", default="traefik")
    parser.add_argument("--streams", type=int, default=3000)
    parser.add_argument("--headers-delay", type=float, default=0.0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    overrides = {name: yaml.safe_load(value) for name, value in (pair.split("=", 1) for pair in args.set)}
    with running_server(server_args(AT_ONCE)) as server, \
            chain([(args.proxy, "fixed", overrides)], server.port) as hops:
        started = time.monotonic()
        cuts, other = asyncio.run(count(hops[0].url, served_model(server.url), args.streams, args.headers_delay))
    changed = "".join(f", {name}={value}" for name, value in overrides.items())
    print(f"{args.proxy} fixed{changed}, headers {args.headers_delay * 1000:.0f} ms late: {cuts} of {args.streams} "
          f"streams cut early; {len(other)} ended otherwise {sorted(set(other))} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
