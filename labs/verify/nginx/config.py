"""nginx configs parsed with crossplane, every `include` followed, each directive tagged with its file.

crossplane's own `combine=True` mislabels the file of a block that follows an include, so the
includes are inlined here from the per-file payloads: each directive keeps the file and line it
was written on, which is what a finding's `where` and the rewriter's edits need.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import crossplane

from labs.findings import UnusableInput


@dataclass
class Directive:
    name: str
    args: list[str]
    file: str
    line: int
    block: list["Directive"] | None = None
    parent: "Directive | None" = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def children(self, name: str | None = None) -> list["Directive"]:
        return [d for d in self.block or [] if name is None or d.name == name]

    def first(self, name: str) -> "Directive | None":
        found = self.children(name)
        return found[-1] if found else None  # nginx keeps the last of repeated directives

    def walk(self) -> Iterator["Directive"]:
        for child in self.block or []:
            yield child
            yield from child.walk()

    def text(self) -> str:
        return " ".join([self.name, *self.args])


@dataclass
class NginxConfig:
    """The root pseudo-directive (`main` context) and every file read."""

    main: Directive
    files: list[str]

    def blocks(self, name: str) -> list[Directive]:
        return [d for d in self.main.walk() if d.name == name and d.block is not None]


def parse(path: Path) -> NginxConfig:
    """Parse `path` and everything it includes; UnusableInput names the file and line of an error."""
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    payload = crossplane.parse(str(path), comments=False, catch_errors=True, strict=False,
                               check_ctx=True, check_args=True)
    for error in payload.get("errors", []):
        raise UnusableInput(f"nginx config: {error['error']}", file=error.get("file"),
                            line=error.get("line"))
    configs = payload["config"]
    root = Directive("main", [], str(path), 0, block=[])

    def inline(index: int, parent: Directive, stack: tuple[int, ...]) -> list[Directive]:
        if index in stack:
            raise UnusableInput("include loop", file=configs[index]["file"])
        entry = configs[index]
        return convert(entry["parsed"], entry["file"], parent, (*stack, index))

    def convert(items: list[dict], file: str, parent: Directive, stack: tuple[int, ...]) -> list[Directive]:
        out: list[Directive] = []
        for item in items:
            directive = Directive(item["directive"], list(item.get("args", [])), file,
                                  int(item.get("line", 0)), parent=parent)
            out.append(directive)
            if "block" in item:
                directive.block = convert(item["block"], file, directive, stack)
            if directive.name == "include":
                # The include itself stays (the rewriter may point it elsewhere); what it
                # brings in follows it, in the including block, as nginx reads it.
                for included in item.get("includes", []):
                    out.extend(inline(included, parent, stack))
        return out

    root.block = inline(0, root, ())
    return NginxConfig(main=root, files=[c["file"] for c in configs])


def context_chain(directive: Directive) -> list[Directive]:
    """The blocks from `main` down to `directive` itself (the inheritance path)."""
    chain: list[Directive] = []
    node: Directive | None = directive
    while node is not None:
        chain.append(node)
        node = node.parent
    return list(reversed(chain))
