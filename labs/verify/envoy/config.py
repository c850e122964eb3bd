"""Envoy bootstrap YAML, loaded with the position of every value (labs/verify/yamlpos.py): the one
parse verify makes of it, and the HTTP connection managers its listeners hold."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.findings import UnusableInput
from labs.verify import yamlpos
from labs.verify.yamlpos import YamlList, YamlMap

__all__ = ["EnvoyConfig", "HCM_TYPE", "YamlList", "YamlMap", "duration_s", "hcms", "load", "parse", "typed"]

HCM_TYPE = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


@dataclass
class EnvoyConfig:
    """The bootstrap as the user wrote it (`text`, for the rewrite's in-place edits) and as loaded."""

    path: Path
    text: str
    data: YamlMap

    @property
    def static(self) -> YamlMap:
        return self.data.mapping("static_resources")


def load(path: Path) -> tuple[str, YamlMap]:
    return yamlpos.load(path, "an Envoy bootstrap (static_resources, admin, ...)")


def parse(path: Path) -> EnvoyConfig:
    return EnvoyConfig(path, *load(path))


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


def hcms(listener: YamlMap) -> list[tuple[YamlMap, YamlMap]]:
    """(filter chain, its HTTP connection manager's typed_config) of every HCM of a listener."""
    found = []
    for chain in listener.items_list("filter_chains"):
        for item in chain.items_list("filters"):
            if HCM_TYPE in typed(item):
                found.append((chain, item.mapping("typed_config")))
    return found
