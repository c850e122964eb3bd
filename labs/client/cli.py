"""`python -m labs.client URL`: the measuring client on its own, against any OpenAI-compatible URL
(or an Anthropic Messages one: `--api` picks the protocol, its request and how its events are read).

Prints the per-stream summary (and, for several streams, the aggregate with the client's own
CPU per event) as a table or JSON. `--loop uvloop` halves the client's CPU per event when
uvloop is installed; the default event loop is fine up to a few hundred streams.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Sequence

from labs.client import run_many
from labs.client.apis import add_api_option, client_api
from labs.client.durations import milliseconds
from labs.client.results import Event


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m labs.client URL`: measure one or many streams against any OpenAI-compatible URL."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m labs.client", description=main.__doc__)
    ap.add_argument("url", nargs="?", default=None,
                    help="the full URL streams are POSTed to (default: the protocol's path on 127.0.0.1:8000)")
    add_api_option(ap.add_argument)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--prompt", default="Tell me a story.")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--lab", type=json.loads, default=None, help='JSON for the `lab` extension, e.g. \'{"stamp": true}\'')
    ap.add_argument("-n", "--streams", type=int, default=1)
    ap.add_argument("-c", "--concurrency", type=int, default=None, help="default: all streams at once")
    ap.add_argument("--mode", choices=["stream", "read-body"], default="stream")
    ap.add_argument("--read-timeout", type=float, default=30.0)
    ap.add_argument("--total-timeout", type=float, default=300.0)
    ap.add_argument("--deadline", type=float, default=None, help="batch deadline in seconds")
    ap.add_argument("--disconnect-after", type=int, default=None)
    ap.add_argument("--accept-encoding", default="gzip, deflate", help="'' sends none")
    ap.add_argument("--events", action="store_true", help="print every event of the first stream")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    api = client_api(args.api)
    url = args.url or "http://127.0.0.1:8000" + api.path
    body = api.body(args.model, args.prompt, args.max_tokens, args.lab or None)
    options = dict(api=api.name, mode=args.mode, read_timeout_s=args.read_timeout, total_timeout_s=args.total_timeout,
                   disconnect_after_events=args.disconnect_after, accept_encoding=args.accept_encoding or None)
    batch = asyncio.run(run_many(url, [body] * args.streams, args.concurrency or args.streams,
                                 args.deadline, **options))
    first = batch.results[0]
    report: dict[str, Any] = {"aggregate": batch.aggregate()} if args.streams > 1 else {}
    report["first_stream"] = first.summary()
    if args.json:
        if args.events:
            report["events"] = [vars_event(e) for e in first.events]
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for title, numbers in report.items():
        table = Table(title=title, show_header=False)
        for key, value in numbers.items():
            table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
        console.print(table)
    if args.events:
        for e in first.events:
            hop = "" if e.hop_s is None else f"  hop {milliseconds(e.hop_s, digits=1)}"
            line = f"{milliseconds(e.t, digits=1):>12}  read {e.read:4d}  {e.kind:8s} {e.text!r}{hop}"
            console.print(line, markup=False)
    console.print(f"text: {first.text!r}", markup=False)
    return 0


def vars_event(e: Event) -> dict[str, Any]:
    return {"t": e.t, "read": e.read, "kind": e.kind, "text": e.text, "hop_s": e.hop_s}
