"""What each tool of `make bench-peers` reports, in one shape: `Figures`, and `load_export`,
which reads a tool's own output file (or finds it in the folder the tool wrote)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figures:
    """One tool's numbers for one stream count, in seconds and tokens (None: not reported)."""

    requests: int  # completed
    failed: int
    ttft_mean_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_mean_s: float | None = None  # each tool's own ITL (docs/metrics.md)
    itl_p50_s: float | None = None
    gap_p99_s: float | None = None  # p99 of the single gaps between content events
    e2e_mean_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p99_s: float | None = None
    output_tokens: int | None = None  # the tool's own count, all completed requests
    usage_tokens: int | None = None  # what the server's `usage` told the tool
    token_source: str = ""
    notes: list[str] = field(default_factory=list)


def load_export(path: Path, name: str, tool: str) -> tuple[Path, Any]:
    """The JSON of `tool`'s export: `path` is the file itself or the folder holding `name`."""
    path = path / name if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"{tool} wrote no {path.name} in {path.parent}")
    return path, json.loads(path.read_text())
