"""guidellm 0.8.1 in `make bench-peers`: its command line, and its own benchmarks JSON parsed.

guidellm's options take JSON (guidellm/utils/cli.py `parse_arguments`: YAML, so JSON too, or
key=value strings). The `lab` object rides in the backend's `extras.body`, which guidellm merges
into every request body (guidellm/backends/openai/request_handlers.py, `model_combine`). Before
the run it probes `GET /health` (guidellm/backends/openai/http.py, `validate`), which the server
answers like vLLM does. The tokenizer is the lab model's directory (it only makes the prompts).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from labs.bench.peers.figures import Figures, load_export

EXPORT = "benchmarks.json"


def command(executable: Path, url: str, model: str, streams: int, requests: int, lab: Mapping[str, Any],
            tokens: int, prompt_tokens: int, model_dir: Path, out_dir: Path) -> list[str]:
    """`guidellm run`: the concurrent profile at `streams`, stopped after `requests`."""
    backend = {"kind": "openai_http", "target": url, "model": model,
               "extras": {"body": {"lab": dict(lab)}}}
    return [str(executable), "run",
            "--backend", json.dumps(backend),
            "--profile", json.dumps({"kind": "concurrent", "streams": [streams]}),
            "--constraint", json.dumps({"kind": "max_requests", "count": requests}),
            "--data", json.dumps({"kind": "synthetic_text", "prompt_tokens": prompt_tokens,
                                  "output_tokens": tokens}),
            "--tokenizer", json.dumps({"kind": "huggingface_auto", "model": str(model_dir)}),
            "--seed", json.dumps({"kind": "static", "value": 1}),
            "--output", json.dumps({"kind": "json", "path": str(out_dir / EXPORT)}),
            "--disable-console-interactive"]


def _stat(metrics: Mapping[str, Any], name: str, stat: str, scale: float) -> float | None:
    """`stat` (mean, median or a percentile key) of the successful requests' distribution."""
    summary = (metrics.get(name) or {}).get("successful")
    if not summary or not summary.get("count"):
        return None
    value = summary["percentiles"][stat] if stat.startswith("p") else summary[stat]
    return None if value is None else value * scale


def _total(metrics: Mapping[str, Any], name: str) -> int | None:
    summary = (metrics.get(name) or {}).get("successful")
    return None if not summary or summary.get("total_sum") is None else int(round(summary["total_sum"]))


def parse(path: Path) -> Figures:
    """The one benchmark of guidellm's benchmarks.json as side-by-side figures; `path` is the
    export itself or the folder the tool wrote it in."""
    path, data = load_export(path, EXPORT, "guidellm")
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or len(benchmarks) != 1:
        raise ValueError(f"{path}: expected one benchmark, found "
                         f"{len(benchmarks) if isinstance(benchmarks, list) else 'none'}")
    metrics = benchmarks[0]["metrics"]
    totals = metrics["request_totals"]
    ms = 1e-3
    usage = sum(((r.get("output_metrics") or {}).get("text_tokens") or 0)
                for r in (benchmarks[0].get("requests") or {}).get("successful") or [])
    notes = [f"guidellm warns: {w.get('message') if isinstance(w, dict) else w}"
             for w in benchmarks[0].get("warnings") or []]
    return Figures(
        requests=totals["successful"], failed=totals["errored"] + totals["incomplete"],
        ttft_mean_s=_stat(metrics, "time_to_first_token_ms", "mean", ms),
        ttft_p50_s=_stat(metrics, "time_to_first_token_ms", "p50", ms),
        ttft_p99_s=_stat(metrics, "time_to_first_token_ms", "p99", ms),
        itl_mean_s=_stat(metrics, "inter_token_latency_ms", "mean", ms),
        itl_p50_s=_stat(metrics, "inter_token_latency_ms", "p50", ms),
        gap_p99_s=None,  # guidellm keeps only the first and the last token's time of a request
        e2e_mean_s=_stat(metrics, "request_latency", "mean", 1.0),
        e2e_p50_s=_stat(metrics, "request_latency", "p50", 1.0),
        e2e_p99_s=_stat(metrics, "request_latency", "p99", 1.0),
        output_tokens=_total(metrics, "output_token_count"), usage_tokens=usage or None,
        token_source="the server's usage (token iterations when usage is missing)", notes=notes)
