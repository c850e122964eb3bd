"""Measure, by hand, what each proxy config does to a stream: TTFT and events per socket read.

    .venv/bin/python -m tests.proxies.measure_stream [--variants fixed defaults] [--runs 3]
        [--proxies nginx haproxy ...] [--content-types "text/plain; charset=utf-8" ...] [--gzip]

20 events 100 ms apart from the fake upstream (labs.fakes), read by the lab's measuring client
(every socket read numbered), direct and through each proxy. Not part of the test suite (it takes
~2 s per stream).
--server: the real model server instead (synthetic engine, 20 tokens paced at 10 tokens/s).
--content-types: the fake upstream sends the same SSE-framed stream under each type in turn.
--gzip: the client asks for gzip (Accept-Encoding), as a browser does.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
from urllib.parse import urlencode
from typing import Any, Callable, Iterator

from labs.fakes.upstream import fake_upstream
from labs.client.results import StreamResult
from proxies import variant
from proxies.kinds import PROXY_NAMES
from proxies.runtime.local import run_proxy
from tests.runtimes import on_free_ports, stream

PATH = "/v1/chat/completions?n=20&interval=0.1&stamp=1"
COMPLETION: dict[str, Any] = {
    "model": "tiny", "stream": True, "max_tokens": 20, "lab": {"tokens_per_s": 10, "stamp": True},
    "messages": [{"role": "user", "content": "Tell me a story."}]}


@contextlib.contextmanager
def upstream_target(real_server: bool, gzip: bool = False
                    ) -> Iterator[tuple[int, Callable[..., StreamResult]]]:
    """(port, fetch(base_url, content_type=None)) for the fake upstream or the real server."""
    options = {"accept_encoding": "gzip"} if gzip else {}
    if real_server:
        from server.launcher import running_server
        with running_server(["--engine", "synthetic"]) as server:
            yield server.port, lambda base, content_type=None: stream(
                base + "/v1/chat/completions", COMPLETION, **options)
    else:
        with fake_upstream() as upstream:
            yield upstream.port, lambda base, content_type=None: stream(
                base + PATH + ("&" + urlencode({"content_type": content_type}) if content_type else ""), **options)


def row(label: str, results: list[StreamResult]) -> str:
    ttft = statistics.median((r.ttft_s or r.e2e_s) * 1000 for r in results)
    e2e = statistics.median(r.e2e_s * 1000 for r in results)
    per_read = statistics.median(r.summary()["events_per_read_mean"] or 0.0 for r in results)
    reads = statistics.median(r.bursts for r in results)
    delays = [d * 1000 for r in results for d in r.hop_delays]
    delay = f"{statistics.median(delays):6.2f} / {max(delays):7.2f}" if delays else "     - /       -"
    encoding = results[0].headers.get("content-encoding", "-")
    return (f"{label:18} {ttft:8.2f} {e2e:8.0f} {reads:6.0f} {per_read:9.2f}   {delay}   "
            f"{results[0].status} {encoding}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", nargs="+", default=["fixed"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", action="store_true", help="measure with the real model server")
    parser.add_argument("--proxies", nargs="+", default=["nginx", "haproxy", "envoy"], choices=PROXY_NAMES)
    parser.add_argument("--content-types", nargs="+", default=[None], metavar="TYPE",
                        help="the fake upstream's Content-Type, one run of each (default text/event-stream)")
    parser.add_argument("--gzip", action="store_true", help="the client asks for gzip")
    args = parser.parse_args()
    if args.server and args.content_types != [None]:
        parser.error("--content-types sets the fake upstream's header; the real server sends its own")
    print(f"{'path':18} {'TTFT ms':>8} {'E2E ms':>8} {'reads':>6} {'ev/read':>9}   "
          f"delay ms med/max   status enc   type")
    with upstream_target(args.server, args.gzip) as (port, fetch):
        fetch(f"http://127.0.0.1:{port}")  # warm up
        for content_type in args.content_types:
            print(row("direct", [fetch(f"http://127.0.0.1:{port}", content_type) for _ in range(args.runs)]),
                  content_type or "")
        for name in args.variants:
            for proxy in args.proxies:
                with run_proxy(on_free_ports(variant(proxy, name), port)) as running:
                    for content_type in args.content_types:
                        results = [fetch(running.url, content_type) for _ in range(args.runs)]
                        print(row(f"{proxy} {name}", results), content_type or "")


if __name__ == "__main__":
    main()
