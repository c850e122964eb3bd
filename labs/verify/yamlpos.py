"""YAML loaded with the position of every value (for `where` and in-place edits).

Mappings load as `YamlMap` (a dict that also knows each key's and value's node), sequences as
`YamlList`; a node's marks give its line and the exact characters to replace, so a rewrite
changes the user's text only where it must. Envoy bootstraps and Traefik configs are read so.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from labs.findings import UnusableInput

_SCALARS = {"tag:yaml.org,2002:int": int, "tag:yaml.org,2002:float": float}


class YamlMap(dict):
    node: yaml.MappingNode
    key_nodes: dict[str, yaml.Node]
    value_nodes: dict[str, yaml.Node]

    def line(self, key: str | None = None) -> int:
        node = self.key_nodes[key] if key is not None else self.node
        return node.start_mark.line + 1

    def mapping(self, key: str) -> "YamlMap":
        value = self.get(key)
        return value if isinstance(value, YamlMap) else _empty_map()

    def items_list(self, key: str) -> list[Any]:
        value = self.get(key)
        return value if isinstance(value, list) else []


class YamlList(list):
    node: yaml.SequenceNode


def _empty_map() -> YamlMap:
    empty = YamlMap()
    empty.key_nodes, empty.value_nodes = {}, {}
    return empty


def _convert(node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        out = YamlMap()
        out.node, out.key_nodes, out.value_nodes = node, {}, {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            out[key] = _convert(value_node)
            out.key_nodes[key], out.value_nodes[key] = key_node, value_node
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = YamlList(_convert(item) for item in node.value)
        seq.node = node
        return seq
    if node.tag in _SCALARS:
        try:
            return _SCALARS[node.tag](node.value)
        except ValueError:
            return node.value
    if node.tag == "tag:yaml.org,2002:bool":
        return node.value.lower() in ("true", "yes", "on")
    if node.tag == "tag:yaml.org,2002:null":
        return None
    return node.value


def load(path: Path, what: str = "a YAML mapping") -> tuple[str, YamlMap]:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    text = path.read_text()
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UnusableInput(f"not valid YAML: {exc}", file=str(path),
                            line=mark.line + 1 if mark else None) from None
    data = _convert(node) if node is not None else None
    if not isinstance(data, YamlMap):
        raise UnusableInput(f"{what} is a YAML mapping", file=str(path))
    return text, data


def load_all(path: Path) -> tuple[str, list[Any]]:
    """Every document of a multi-document YAML file (Kubernetes manifests), with positions."""
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    text = path.read_text()
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UnusableInput(f"not valid YAML: {exc}", file=str(path),
                            line=mark.line + 1 if mark else None) from None
    return text, [_convert(node) for node in nodes if node is not None]
