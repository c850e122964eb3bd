"""nginx configs parsed with crossplane file by file, every `include` followed, each directive
tagged with its file, line and place on that line.

Includes are resolved here (labs/verify/nginx/includes.py), not by crossplane: a config checked
out of a repository names the paths of the machine it is deployed on. A site file (a `server`
block for `conf.d/`, with its `upstream`s) is read inside the stock main config of its platform
(`--main`, labs/verify/nginx/platforms.py), included where that main includes its sites.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import crossplane

from labs.findings import UnusableInput
from labs.verify.model import display_path
from labs.verify.nginx import includes
from labs.verify.nginx.platforms import DEFAULT_PLATFORM, Platform, platform as platform_named

# What only a main config has at its top level; a site file's top level is http-context only.
MAIN_ONLY = ("http", "events", "stream", "mail", "worker_processes", "user", "pid", "load_module")
# Blocks whose lines are a table's entries (a MIME type, a map's value), not directives.
TABLES = ("types", "map", "geo", "split_clients", "charset_map")


@dataclass
class Directive:
    name: str
    args: list[str]
    file: str
    line: int
    block: list["Directive"] | None = None
    parent: "Directive | None" = field(default=None, repr=False)
    nth: int = 0  # how many statements of this name come before it on its line
    label: str = ""  # the file as the user sees it (a platform's main is named, not its path)

    @property
    def where(self) -> str:
        return f"{self.label or display_path(self.file)}:{self.line}"

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
    """The root pseudo-directive (`main` context), every file read (the main first), and how the
    includes were resolved."""

    main: Directive
    files: list[str]
    entry: str  # the file the user gave
    platform: Platform | None = None  # set when the entry is a site file
    included: dict[int, list[str]] = field(default_factory=dict)  # id(include) -> files it reads
    missing: list[Directive] = field(default_factory=list)  # includes whose file is not here
    site_include: Directive | None = None  # the platform's include that now reads the entry
    labels: dict[str, str] = field(default_factory=dict)  # file -> how it is shown

    def blocks(self, name: str) -> list[Directive]:
        return [d for d in self.main.walk() if d.name == name and d.block is not None]

    def shown(self, file: str) -> str:
        return self.labels.get(file) or display_path(file)

    def directive_names(self) -> set[str]:
        """The name of every directive of every file read, a table's entries left out."""
        names: set[str] = set()
        blocks = [self.main]
        while blocks:
            block = blocks.pop()
            for d in block.block or []:
                names.add(d.name)
                if d.name not in TABLES:
                    blocks.append(d)
        return names


def parse(path: Path, main: str | None = None) -> NginxConfig:
    """Parse `path` and everything it includes; UnusableInput names the file and line of an error.

    `main`: for a site file, the platform (or main config file) it is included from; default the
    official image's. A whole nginx.conf is read as it is (`main` must then be None)."""
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    entry = os.path.abspath(path)
    top = [d["directive"] for d in _parse_file(entry)]
    is_site = not any(name in MAIN_ONLY for name in top)
    if not is_site:
        if main is not None:
            raise UnusableInput("--main is for a site file (a server block for conf.d/); this is a whole "
                                "nginx.conf (it has " + next(n for n in top if n in MAIN_ONLY) + ")",
                                file=str(path))
        return _Reader(entry, entry, None).read()
    if not any(name in ("server", "upstream") for name in top):
        raise UnusableInput("neither a whole nginx.conf nor a site file: its top level has no http, server "
                            "or upstream block (a snippet for inside a server? verify the file that "
                            "includes it)", file=str(path))
    platform = platform_named(main or DEFAULT_PLATFORM)
    return _Reader(str(platform.main), entry, platform).read()


class _Reader:
    def __init__(self, main_file: str, entry: str, platform: Platform | None) -> None:
        self.config = NginxConfig(Directive("main", [], main_file, 0, block=[]), [], entry, platform)
        self.layout = includes.Layout.for_entry(entry, platform)
        if platform is not None and main_file != entry:
            self.config.labels[main_file] = f"{platform.name} nginx.conf"
        self.on_line: Counter[tuple[str, int, str]] = Counter()

    def read(self) -> NginxConfig:
        config = self.config
        config.main.block = self._file(config.main.file, config.main, ())
        config.main.label = config.shown(config.main.file)
        if config.platform is not None and config.site_include is None:
            self._append_site(config)
        return config

    def _file(self, file: str, parent: Directive, stack: tuple[str, ...]) -> list[Directive]:
        if file in stack:
            raise UnusableInput("include loop", file=display_path(file))
        if file not in self.config.files:
            self.config.files.append(file)
        return self._convert(_parse_file(file), file, parent, (*stack, file))

    def _convert(self, items: list[dict], file: str, parent: Directive, stack: tuple[str, ...]) -> list[Directive]:
        out: list[Directive] = []
        for item in items:
            name, line = item["directive"], int(item.get("line", 0))
            key = (file, line, name)
            directive = Directive(name, list(item.get("args", [])), file, line, parent=parent,
                                  nth=self.on_line[key], label=self.config.shown(file))
            self.on_line[key] += 1
            out.append(directive)
            if "block" in item:
                directive.block = self._convert(item["block"], file, directive, stack)
            if name == "include" and directive.args:
                # The include itself stays (the rewriter points it at the copies); what it brings
                # in follows it, in the including block, as nginx reads it.
                for included in self._included(directive):
                    out.extend(self._file(included, parent, stack))
        return out

    def _included(self, include: Directive) -> list[str]:
        config = self.config
        pattern = include.args[0]
        if config.platform is not None and include.file == config.main.file and config.site_include is None \
                and (pattern in config.platform.site_includes or (not config.platform.site_includes and "*" in pattern)):
            config.site_include = include  # where the platform includes its sites: the user's file
            found = [config.entry]
        elif config.platform is not None and include.file == config.main.file and pattern in config.platform.site_includes:
            found = []  # the platform's other site folders: the user's file is judged alone
        else:
            resolved = includes.resolve(pattern, self.layout)
            if resolved is None:
                config.missing.append(include)
                return []
            found = [f for f in resolved if f != config.main.file]
        config.included[id(include)] = found
        return found

    def _append_site(self, config: NginxConfig) -> None:
        """A main config of the user's with no site include: the site file goes at the end of http."""
        http = config.main.first("http")
        if http is None:
            raise UnusableInput("the --main config has no http block to include the site file in",
                                file=config.shown(config.main.file))
        include = Directive("include", [config.entry], http.file, http.line, parent=http, nth=-1,
                            label=http.label)  # nth -1: not in the file, the rewrite inserts it
        config.site_include = include
        config.included[id(include)] = [config.entry]
        http.block = [*(http.block or []), include, *self._file(config.entry, http, (http.file,))]


def _parse_file(file: str) -> list[dict]:
    payload = crossplane.parse(file, single=True, comments=False, catch_errors=True, strict=False,
                               check_ctx=False, check_args=True)
    for error in payload.get("errors", []):
        raise UnusableInput(f"nginx config: {error['error']}", file=display_path(error.get("file") or file),
                            line=error.get("line"))
    return payload["config"][0]["parsed"] if payload["config"] else []


def context_chain(directive: Directive) -> list[Directive]:
    """The blocks from `main` down to `directive` itself (the inheritance path)."""
    chain: list[Directive] = []
    node: Directive | None = directive
    while node is not None:
        chain.append(node)
        node = node.parent
    return list(reversed(chain))
