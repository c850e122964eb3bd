"""NVIDIA AIPerf 0.13.0 in `make bench-peers`: its command line, and its own export parsed.

AIPerf counts output tokens with a tokenizer on the client. Given the lab model's tokenizer as a
local directory under HF_HUB_OFFLINE=1 it still asks huggingface_hub for a snapshot of that
"repo" (aiperf/common/tokenizer.py, `_from_pretrained_local` -> `_resolve_local_snapshot`) and
fails, so `hub_cache` lays the tokenizer files out as a cached hub snapshot of a made-up repo id
and AIPerf loads that: offline, with the very tokenizer the server counts `usage` with.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping

from labs.bench.peers.figures import Figures, load_export

REPO_ID = "streamlab/tiny"  # the made-up hub id of the cached snapshot
SNAPSHOT = "0" * 40
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json",
                   "special_tokens_map.json", "generation_config.json")
EXPORT = "profile_export_aiperf.json"


def hub_cache(model_dir: Path, cache: Path) -> Path:
    """A hub cache (HF_HUB_CACHE) holding `model_dir`'s tokenizer as the snapshot of REPO_ID."""
    repo = cache / ("models--" + REPO_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / SNAPSHOT
    snapshot.mkdir(parents=True, exist_ok=True)
    copied = 0
    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            shutil.copy2(model_dir / name, snapshot / name)
            copied += 1
    if not (snapshot / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{model_dir} has no tokenizer.json (run `make setup` to build the model)")
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(SNAPSHOT)
    return cache


def command(executable: Path, url: str, model: str, streams: int, requests: int, lab: Mapping[str, Any],
            tokens: int, prompt_tokens: int, out_dir: Path) -> list[str]:
    """`aiperf profile` at `streams` concurrent requests, `requests` in all, the `lab` object in
    every body (`--extra-inputs`), nothing beyond the measurement (no UI, no /metrics scrape)."""
    return [str(executable), "profile", "--model", model, "--url", url, "--endpoint-type", "chat",
            "--streaming", "--tokenizer", REPO_ID, "--concurrency", str(streams),
            "--request-count", str(requests),
            "--synthetic-input-tokens-mean", str(prompt_tokens), "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(tokens), "--output-tokens-stddev", "0",
            "--extra-inputs", json.dumps({"lab": dict(lab)}), "--random-seed", "1",
            "--artifact-dir", str(out_dir), "--ui", "none",
            "--no-server-metrics", "--no-gpu-telemetry"]


def _seconds(metric: Mapping[str, Any] | None, stat: str) -> float | None:
    """A time statistic of the export (AIPerf writes them in the metric's display unit, ms)."""
    if not metric or metric.get(stat) is None:
        return None
    unit = metric.get("unit")
    scale = {"ms": 1e-3, "ns": 1e-9, "us": 1e-6, "sec": 1.0, "s": 1.0}.get(unit)
    if scale is None:
        raise ValueError(f"AIPerf export: unexpected time unit {unit!r}")
    return metric[stat] * scale


def _count(metric: Mapping[str, Any] | None) -> int | None:
    return None if not metric or metric.get("avg") is None else int(round(metric["avg"]))


def _mean_of(metric: Mapping[str, Any] | None) -> float:
    return float(metric["avg"]) if metric and metric.get("avg") is not None else 0.0


def parse(path: Path) -> Figures:
    """AIPerf's own aggregate (profile_export_aiperf.json) as side-by-side figures; `path` is the
    export itself or the folder the tool wrote it in."""
    path, data = load_export(path, EXPORT, "AIPerf")
    if "time_to_first_token" not in data:
        raise ValueError(f"{path} has no time_to_first_token: not an AIPerf profile export")
    completed = _count(data.get("completed_request_count")) or 0
    errors = _count(data.get("error_request_count")) or 0
    ttft, itl, icl, e2e = (data.get(k) for k in ("time_to_first_token", "inter_token_latency",
                                                  "inter_chunk_latency", "request_latency"))
    notes = []
    if data.get("was_cancelled"):
        notes.append("AIPerf says the run was cancelled")
    mismatched = _count(data.get("usage_discrepancy_count"))
    if mismatched:
        prompt, completion = (_mean_of(data.get(f"usage_{k}_tokens_diff_pct")) for k in ("prompt", "completion"))
        notes.append(f"AIPerf flags {mismatched} requests whose token counts differ from `usage` by over 10%: "
                     f"prompt tokens by {prompt:.0f}% on average (the server counts the chat template's "
                     f"tokens, AIPerf the bare prompt), completion tokens by {completion:.0f}%")
    return Figures(
        requests=completed, failed=errors,
        ttft_mean_s=_seconds(ttft, "avg"), ttft_p50_s=_seconds(ttft, "p50"), ttft_p99_s=_seconds(ttft, "p99"),
        itl_mean_s=_seconds(itl, "avg"), itl_p50_s=_seconds(itl, "p50"), gap_p99_s=_seconds(icl, "p99"),
        e2e_mean_s=_seconds(e2e, "avg"), e2e_p50_s=_seconds(e2e, "p50"), e2e_p99_s=_seconds(e2e, "p99"),
        output_tokens=_count(data.get("total_output_tokens")),
        usage_tokens=_count(data.get("total_usage_completion_tokens")),
        token_source="client-side tokenizer over the streamed text", notes=notes)
