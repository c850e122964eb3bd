"""Apache httpd configs tokenized file by file, every `Include`/`IncludeOptional` followed, each
directive tagged with its file and lines.

The syntax (https://httpd.apache.org/docs/2.4/configuring.html#syntax): one directive a line, a
`\\` at the end of a line continues it, a line starting with `#` is a comment, arguments are split
on blanks unless quoted, `<Section args>` ... `</Section>` nest. Directive names are case-blind.
`${VAR}` is replaced by what `Define` (or, for Debian's layout, its `envvars`) sets, as httpd does.

Includes are resolved here (labs/verify/apache/platforms.py says how), not on this machine's
/etc/apache2. A site file (`<VirtualHost>` blocks for `sites-available/`) is read inside the stock
main config of its platform (`--main`), where that main includes its sites.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from labs.findings import UnusableInput
from labs.verify.apache import platforms
from labs.verify.model import display_path, read_text

# What only a whole httpd.conf / apache2.conf has at its top level.
MAIN_ONLY = ("serverroot", "loadmodule", "mutex", "pidfile", "user", "group")
CONDITIONALS = ("ifmodule", "ifdefine", "ifversion", "iffile", "ifdirective", "ifsection")
_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


@dataclass
class Directive:
    name: str  # as written (the rewrite edits the user's text)
    args: list[str]
    file: str
    line: int
    last_line: int = 0  # the last line of a continued directive (or of the section's opener)
    block: list["Directive"] | None = None  # a <Section>'s contents
    parent: "Directive | None" = field(default=None, repr=False)
    label: str = ""
    active: bool = True  # False inside a conditional that does not hold

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def where(self) -> str:
        return f"{self.label or display_path(self.file)}:{self.line}"

    def text(self) -> str:
        shown = " ".join(f'"{a}"' if (not a or " " in a) else a for a in self.args)
        return f"<{self.name} {shown}>" if self.block is not None else f"{self.name} {shown}".strip()

    def children(self, key: str | None = None) -> list["Directive"]:
        """Active directives of this block, those of conditionals that hold flattened in."""
        out = []
        for d in self.block or []:
            if not d.active:
                continue
            if d.key in CONDITIONALS:
                out.extend(d.children(key))
            elif key is None or d.key == key:
                out.append(d)
        return out

    def last(self, key: str) -> "Directive | None":
        found = self.children(key)
        return found[-1] if found else None

    def walk(self, every: bool = False) -> Iterator["Directive"]:
        """Every directive below, in file order; `every`: those of false conditionals too."""
        for child in self.block or []:
            if child.active or every:
                yield child
                yield from child.walk(every)


@dataclass
class ApacheConfig:
    main: Directive  # the root pseudo-section: the main server's context
    files: list[str]
    entry: str
    platform: platforms.Platform | None = None
    included: dict[int, list[str]] = field(default_factory=dict)  # id(Include) -> files it read
    missing: list[Directive] = field(default_factory=list)  # an Include whose file is not here
    site_include: Directive | None = None  # the platform's include that now reads the entry
    labels: dict[str, str] = field(default_factory=dict)
    defines: dict[str, str] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)  # loaded: "proxy_module", "mod_proxy.c"

    def shown(self, file: str) -> str:
        return self.labels.get(file) or display_path(file)

    def vhosts(self) -> list[Directive]:
        return [d for d in self.main.walk() if d.key == "virtualhost" and d.block is not None]


def parse(path: Path, main: str | None = None) -> ApacheConfig:
    """Parse `path` and what it includes; UnusableInput names the file and line of an error."""
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    entry = os.path.abspath(path)
    top = [d.key for d in tokenize(entry)]
    if any(key in MAIN_ONLY for key in top):
        if main is not None:
            raise UnusableInput("--main is for a site file (a <VirtualHost> for sites-available/); this is a "
                                "whole httpd config (it has " + next(k for k in top if k in MAIN_ONLY) + ")",
                                file=str(path))
        return _Reader(entry, entry, None).read()
    if not any(key in ("virtualhost", "proxypass", "proxypassmatch", "location", "rewriterule") for key in top):
        raise UnusableInput("neither a whole httpd config nor a site file: its top level has no "
                            "<VirtualHost>, ProxyPass, ServerRoot or LoadModule", file=str(path))
    platform = platforms.platform(main or platforms.DEFAULT_PLATFORM)
    return _Reader(str(platform.main), entry, platform).read()


def tokenize(file: str, text: str | None = None) -> list[Directive]:
    """One file's directives (`text`: its content, else read), sections nested (includes not followed)."""
    text = read_text(file) if text is None else text
    lines = text.split("\n")
    root = Directive("main", [], file, 0, block=[])
    stack = [root]
    number = 0
    while number < len(lines):
        first = number + 1
        line = lines[number].rstrip("\r")
        while line.endswith("\\") and number + 1 < len(lines):  # a continued line
            number += 1
            line = line[:-1] + " " + lines[number].lstrip().rstrip("\r")
        number += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{display_path(file)}:{first}"
        if stripped.startswith("</"):
            name = stripped[2:].rstrip(">").strip().lower()
            if len(stack) == 1 or stack[-1].key != name:
                expected = f"</{stack[-1].name}>" if len(stack) > 1 else "no section open"
                raise UnusableInput(f"apache config: {stripped} without matching <{name}> section "
                                    f"({expected})", file=display_path(file), line=first)
            stack.pop()
            continue
        if stripped.startswith("<"):
            if not stripped.endswith(">"):
                raise UnusableInput(f"apache config: <{stripped[1:].split()[0]} directive missing closing '>'",
                                    file=display_path(file), line=first)
            words = split_args(stripped[1:-1], where)
            section = Directive(words[0], words[1:], file, first, number, block=[], parent=stack[-1])
            stack[-1].block.append(section)
            stack.append(section)
            continue
        words = split_args(stripped, where)
        if not re.fullmatch(r"[A-Za-z][\w-]*", words[0]):
            raise UnusableInput(f"apache config: invalid command {words[0]!r}", file=display_path(file), line=first)
        stack[-1].block.append(Directive(words[0], words[1:], file, first, number, parent=stack[-1]))
    if len(stack) > 1:
        raise UnusableInput(f"apache config: <{stack[-1].name}> was not closed", file=display_path(file),
                            line=stack[-1].line)
    return root.block


def split_args(text: str, where: str = "") -> list[str]:
    """Apache's ap_getword_conf: blanks separate, "..." and '...' quote, \\ escapes in quotes."""
    words, index = [], 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        if text[index] in "\"'":
            quote, index, word = text[index], index + 1, []
            while index < len(text) and text[index] != quote:
                if text[index] == "\\" and index + 1 < len(text) and text[index + 1] in (quote, "\\"):
                    index += 1
                word.append(text[index])
                index += 1
            if index >= len(text):
                raise UnusableInput(f"apache config: unterminated quote in {text!r} ({where})")
            words.append("".join(word))
            index += 1
        else:
            end = index
            while end < len(text) and not text[end].isspace():
                end += 1
            words.append(text[index:end])
            index = end
    return words


class _Reader:
    def __init__(self, main_file: str, entry: str, platform: platforms.Platform | None) -> None:
        self.config = ApacheConfig(Directive("main", [], main_file, 0, block=[]), [], entry, platform)
        self.config.modules = set(platforms.BUILT_IN)
        if platform is not None:
            self.config.labels[main_file] = f"{platform.name} apache2.conf"
            self.config.defines.update(platform.defines)
        self.layout = platforms.Layout.for_entry(entry, platform)

    def read(self) -> ApacheConfig:
        config = self.config
        config.main.block = self._file(config.main.file, config.main, (), True)
        config.main.label = config.shown(config.main.file)
        if config.platform is not None and config.site_include is None:
            # A main of the user's with no site include: the site file goes at its end.
            include = Directive("IncludeOptional", [config.entry], config.main.file, 0, parent=config.main,
                                label=config.main.label)  # line 0: not in the file, the rewrite appends it
            config.site_include = include
            config.included[id(include)] = [config.entry]
            config.main.block += [include, *self._file(config.entry, config.main, (config.main.file,), True)]
        return config

    def _file(self, file: str, parent: Directive, stack: tuple[str, ...], active: bool) -> list[Directive]:
        if file in stack:
            raise UnusableInput("Include loop", file=display_path(file))
        if file not in self.config.files:
            self.config.files.append(file)
            platform = self.config.platform
            if platform is not None and file.startswith(str(platform.folder) + os.sep):
                self.config.labels.setdefault(file, f"{platform.name} {os.path.relpath(file, platform.folder)}")
        items = tokenize(file)
        return self._adopt(items, file, parent, (*stack, file), active)

    def _adopt(self, items: list[Directive], file: str, parent: Directive, stack: tuple[str, ...],
               active: bool) -> list[Directive]:
        out: list[Directive] = []
        for d in items:
            d.parent, d.label, d.active = parent, self.config.shown(file), active
            d.args = [self._expand(a) for a in d.args]
            out.append(d)
            if d.block is not None:
                holds = active and (d.key not in CONDITIONALS or self._holds(d))
                d.block = self._adopt(d.block, file, d, stack, holds)
            elif active and d.key == "define" and d.args:
                self.config.defines[d.args[0]] = d.args[1] if len(d.args) > 1 else ""
            elif active and d.key == "loadmodule" and d.args:
                name = d.args[0]
                self.config.modules |= {name, "mod_" + name.removesuffix("_module") + ".c"}
            elif d.key in ("include", "includeoptional") and d.args:
                for included in self._included(d):
                    out.extend(self._file(included, parent, stack, active))
        return out

    def _expand(self, text: str) -> str:
        return _VAR.sub(lambda m: self.config.defines.get(m[1], os.environ.get(m[1], m[0])), text)

    def _holds(self, d: Directive) -> bool:
        arg = " ".join(d.args).strip()
        negated = arg.startswith("!")
        arg = arg.lstrip("!").strip()
        if d.key == "ifmodule":
            found = arg in self.config.modules
        elif d.key == "ifdefine":
            found = arg in self.config.defines
        elif d.key == "iffile":
            found = os.path.exists(arg)
        else:  # IfVersion, IfDirective, IfSection: taken as holding for httpd 2.4 (said in the docs)
            found = True
        return found != negated

    def _included(self, include: Directive) -> list[str]:
        config, pattern = self.config, include.args[0]
        if config.platform is not None and include.file == config.main.file and config.site_include is None \
                and pattern in config.platform.site_includes:
            config.site_include = include  # where the platform includes its sites: the user's file
            found = [config.entry]
        else:
            resolved = platforms.resolve(pattern, self.layout, include.file)
            if resolved is None or (not resolved and include.key == "include"):
                if include.key == "include":
                    config.missing.append(include)
                resolved = []
            found = [f for f in resolved if f != config.main.file]
        config.included[id(include)] = found
        return found
