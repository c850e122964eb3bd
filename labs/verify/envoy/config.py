"""Envoy bootstrap YAML, loaded with the position of every value (labs/verify/yamlpos.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from labs.findings import UnusableInput
from labs.verify import yamlpos
from labs.verify.yamlpos import YamlList, YamlMap

__all__ = ["YamlList", "YamlMap", "duration_s", "load", "typed"]


def load(path: Path) -> tuple[str, YamlMap]:
    return yamlpos.load(path, "an Envoy bootstrap (static_resources, admin, ...)")


def duration_s(value: Any) -> float | None:
    """A protobuf Duration ("15s", "0.5s", {seconds: 15}) in seconds; None when absent."""
    if value is None:
        return None
    if isinstance(value, dict):
        return float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(value).strip())
    if match is None:
        raise UnusableInput(f"not a duration: {value!r} (Envoy writes durations as '15s')")
    return float(match[1])


def typed(config: YamlMap) -> str:
    return str(config.mapping("typed_config").get("@type", ""))
