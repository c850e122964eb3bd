"""In-place edits of a user's YAML text, at the exact characters of each node (yamlpos.py)."""
from __future__ import annotations

from typing import Any, Iterator

import yaml

from labs.verify.yamlpos import YamlList, YamlMap


class Edits:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int, str]] = []

    def scalar(self, node: yaml.Node, new: str) -> None:
        self.spans.append((node.start_mark.index, node.end_mark.index, new))

    def pair(self, owner: YamlMap, key: str, new: str) -> None:
        start = owner.key_nodes[key].start_mark.index
        end = owner.value_nodes[key].end_mark.index
        while end > start and self.text[end - 1].isspace():
            end -= 1
        self.spans.append((start, end, new))

    def comment(self, owner: YamlMap, key: str) -> None:
        """Drop `key: value` (up to the next key, so a list item's `- ` stays with that key)."""
        keys = list(owner.key_nodes)
        start = owner.key_nodes[key].start_mark.index
        following = keys[keys.index(key) + 1:]
        if following:
            end = owner.key_nodes[following[0]].start_mark.index
        else:
            end = owner.value_nodes[key].end_mark.index
            while end > start and self.text[end - 1].isspace():
                end -= 1
        self.spans.append((start, end, ""))

    def top(self, lines: list[str]) -> None:
        self.spans.append((0, 0, "".join(line + "\n" for line in lines)))

    def apply(self) -> str:
        text = self.text
        for start, end, new in sorted(self.spans, reverse=True):
            text = text[:start] + new + text[end:]
        return text

    def replace_pair(self, owner: YamlMap, key: str, pairs: list[str]) -> None:
        """Put `pairs` (each `key: value`, flow style) where `key: value` was, at its indentation."""
        if owner.node.flow_style:
            joiner = ", "
        else:
            joiner = "\n" + " " * owner.key_nodes[key].start_mark.column
        self.pair(owner, key, joiner.join(pairs))

    def drop_item(self, seq: YamlList, index: int) -> None:
        """Leave one item out of a sequence (block `- item` or flow `[a, b]`)."""
        node = seq.node.value[index]
        if seq.node.flow_style:
            if index + 1 < len(seq.node.value):
                self.spans.append((node.start_mark.index, seq.node.value[index + 1].start_mark.index, ""))
            elif index > 0:
                self.spans.append((seq.node.value[index - 1].end_mark.index, node.end_mark.index, ""))
            else:
                self.spans.append((node.start_mark.index, node.end_mark.index, ""))
            return
        start = self.text.rindex("-", 0, node.start_mark.index)
        if index + 1 < len(seq.node.value):
            end = self.text.rindex("-", 0, seq.node.value[index + 1].start_mark.index)
        else:
            end = node.end_mark.index
            while end > start and self.text[end - 1].isspace():
                end -= 1
        self.spans.append((start, end, ""))


def set_address(edits: Edits, socket: YamlMap, port: int) -> None:
    edits.scalar(socket.value_nodes["address"], "127.0.0.1")
    if "port_value" in socket:
        edits.scalar(socket.value_nodes["port_value"], str(port))
    if "resolver_name" in socket:
        edits.comment(socket, "resolver_name")


def walk(node: Any) -> Iterator[YamlMap]:
    if isinstance(node, YamlMap):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, (list, YamlList)):
        for item in node:
            yield from walk(item)
