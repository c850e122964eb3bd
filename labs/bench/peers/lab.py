"""The lab's own measuring client as one of the three tools of `make bench-peers`.

It runs in a process of its own (`python -m labs.bench.peers.lab URL ...`), as the peers do, so
its CPU is measured the same way (the whole process, start-up and imports included). It writes
every stream's summary and the aggregate to a JSON file; `parse` turns that file into the
side-by-side figures with the lab's definitions (docs/metrics.md).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path
from typing import Any, Sequence

from labs.bench.peers.figures import Figures


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def measure(url: str, body: dict[str, Any], streams: int, requests: int, out: Path) -> None:
    from labs import client
    from labs.client.results import percentile

    batch = asyncio.run(client.run_many(url + "/v1/chat/completions", [body] * requests, streams, 600.0))
    ok = [r for r in batch.results if r.outcome == "complete"]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2es = [r.e2e_s for r in ok if r.e2e_s is not None]
    gaps = [g for r in ok for g in r.gaps]
    usage = [int((r.usage or {}).get("completion_tokens", 0)) for r in ok]
    result = {
        "tool": "lab", "streams": streams, "requests": requests, "complete": len(ok),
        "outcomes": batch.aggregate()["outcomes"], "wall_s": batch.wall_s,
        "ttft_mean_s": _mean(ttfts), "ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
        "gap_mean_s": _mean(gaps), "gap_p50_s": percentile(gaps, 50), "gap_p99_s": percentile(gaps, 99),
        "e2e_mean_s": _mean(e2es), "e2e_p50_s": percentile(e2es, 50), "e2e_p99_s": percentile(e2es, 99),
        "content_events": sum(r.content_events for r in ok), "usage_completion_tokens": sum(usage),
    }
    out.write_text(json.dumps(result, indent=2) + "\n")


def parse(path: Path) -> Figures:
    """The lab client's JSON file as side-by-side figures."""
    data = json.loads(path.read_text())
    complete = data["complete"]
    return Figures(
        requests=complete, failed=data["requests"] - complete,
        ttft_mean_s=data["ttft_mean_s"], ttft_p50_s=data["ttft_p50_s"], ttft_p99_s=data["ttft_p99_s"],
        itl_mean_s=data["gap_mean_s"], itl_p50_s=data["gap_p50_s"], gap_p99_s=data["gap_p99_s"],
        e2e_mean_s=data["e2e_mean_s"], e2e_p50_s=data["e2e_p50_s"], e2e_p99_s=data["e2e_p99_s"],
        output_tokens=data["content_events"], usage_tokens=data["usage_completion_tokens"],
        token_source="content events (one per token: the streams are scripted)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.bench.peers.lab", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server's base URL (http://127.0.0.1:PORT)")
    parser.add_argument("--body", required=True, help="the request body (JSON)")
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(list(argv) if argv is not None else None)
    measure(args.url, json.loads(args.body), args.streams, args.requests, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
