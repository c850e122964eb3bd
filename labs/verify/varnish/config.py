"""A VCL file as verify reads it: its `include`s followed, its tokens, its declarations.

The real check is Varnish's own compiler (`varnishd -C`, run on the copy `rewrite.checked` makes:
every backend pointed at loopback, so the compiler resolves no user host name); its message, with
the file and line it names, is the user's error. This reader takes from the text only what verify
needs: `vcl X.Y;`, `import`, `backend NAME { .attr = value; }`, `probe`, the `sub`s (their
statements: labs/verify/varnish/vcl.py), and the directors built in `vcl_init`.

An `include "x.vcl";` is read from beside the including file, then (a path for the deployed
machine, `/etc/varnish/x.vcl`) by its tail beside the entry file, then from Varnish's vcl_path.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.model import display_path, read_text

VCL_PATH = (Path("/etc/varnish"), Path("/usr/share/varnish/vcl"))  # Varnish's default vcl_path
TOKEN = re.compile(r'''
    (?P<space>\s+) | (?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<str>"""(?:.|\n)*?"""|\{"(?:.|\n)*?"\}|"[^"\n]*")
  | (?P<num>\d+(?:\.\d+)?(?:[KMGT]?B|ms|s|m|h|d|w|y)?(?![\w.]))
  | (?P<word>[A-Za-z_][\w.-]*(?<![.-]))
  | (?P<op>==|!=|<=|>=|!~|&&|\|\||\+=|-=|\*=|/=|[-+*/=<>~!(){};,.])
''', re.X | re.S)


@dataclass(frozen=True)
class Token:
    text: str
    kind: str  # str, num, word, op
    file: Path
    line: int
    at: int = 0  # its offset in the file's text

    @property
    def value(self) -> str:
        """A string's content (any of VCL's three quotings); other tokens as written."""
        if self.kind != "str":
            return self.text
        for quote, end in (('"""', '"""'), ('{"', '"}'), ('"', '"')):
            if self.text.startswith(quote):
                return self.text[len(quote):-len(end)]
        return self.text

    def where(self) -> str:
        return f"{display_path(self.file)}:{self.line}"


@dataclass
class VclFile:
    path: Path
    text: str
    includes: list[tuple[int, str, Path]] = field(default_factory=list)  # (line, as written, resolved)


@dataclass
class Backend:
    name: str
    token: Token  # its name in `backend NAME {`
    attrs: dict[str, tuple[list[Token], Token]] = field(default_factory=dict)  # .attr -> (value, .attr)

    def attr(self, name: str) -> str | None:
        found = self.attrs.get(name)
        return " ".join(t.value for t in found[0]) if found else None


@dataclass
class Director:
    name: str
    kind: str  # round_robin, fallback, random, hash, shard
    token: Token
    members: list[str] = field(default_factory=list)


@dataclass
class Vcl:
    entry: Path
    files: list[VclFile]
    version: str | None = None
    imports: list[str] = field(default_factory=list)
    backends: dict[str, Backend] = field(default_factory=dict)  # in declaration order: the first is the default
    probes: list[Token] = field(default_factory=list)
    subs: dict[str, list[list[Token]]] = field(default_factory=dict)  # name -> bodies, in order (VCL concatenates)
    sub_tokens: dict[str, list[Token]] = field(default_factory=dict)  # name -> the `sub NAME` token of each
    directors: dict[str, Director] = field(default_factory=dict)

    @property
    def shown(self) -> str:
        return display_path(self.entry)


def parse(path: Path) -> Vcl:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    files: list[VclFile] = []
    tokens = _tokens(path, path, files, [])
    vcl = Vcl(path, files)
    _declarations(vcl, tokens)
    if not vcl.backends:
        raise UnusableInput("no backend is declared: nothing is proxied (`backend NAME { .host = ...; }`)",
                            file=str(path))
    return vcl


def backends_in(path: Path, text: str) -> dict[str, Backend]:
    """The backends one file's text declares, its includes not followed (a rewritten file's)."""
    vcl = Vcl(path, [VclFile(path, text)])
    _declarations(vcl, _lex(path, text))
    return vcl.backends


def _lex(path: Path, text: str) -> list[Token]:
    raw: list[Token] = []
    offset, line = 0, 1
    while offset < len(text):
        match = TOKEN.match(text, offset)
        if match is None:
            raise UnusableInput(f"not VCL: unexpected {text[offset]!r}", file=str(path), line=line)
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            raw.append(Token(match.group(), kind, path, line, offset))
        line += match.group().count("\n")
        offset = match.end()
    return raw


def _tokens(path: Path, entry: Path, files: list[VclFile], stack: list[Path]) -> list[Token]:
    if path.resolve() in stack:
        raise UnusableInput("include loop: " + " -> ".join(map(display_path, [*stack, path])), file=str(path))
    text = read_text(path)
    here = VclFile(path, text)
    files.append(here)
    raw = _lex(path, text)
    out: list[Token] = []
    index = 0
    while index < len(raw):
        token = raw[index]
        if token.text == "include" and index + 1 < len(raw) and raw[index + 1].kind == "str" \
                and (not out or out[-1].text in (";", "}")):
            name = raw[index + 1].value
            target = resolve_include(name, path, entry)
            if target is None:
                raise UnusableInput(f"include {name!r}: no such file beside {display_path(path)}, beside "
                                    f"{display_path(entry)} (by its tail) or in vcl_path", file=str(path),
                                    line=token.line)
            here.includes.append((token.line, name, target))
            out.extend(_tokens(target, entry, files, [*stack, path.resolve()]))
            index += 3 if index + 2 < len(raw) and raw[index + 2].text == ";" else 2
            continue
        out.append(token)
        index += 1
    return out


def resolve_include(name: str, including: Path, entry: Path) -> Path | None:
    written = Path(name)
    if written.is_absolute():
        parts = written.parts[1:]
        tails = [Path(*parts[i:]) for i in range(len(parts))]
        beside = [entry.parent / tail for tail in tails] + [including.parent / tail for tail in tails]
        return next((p for p in [*beside, written] if p.is_file()), None)
    candidates = [including.parent / written, entry.parent / written, *(d / written for d in VCL_PATH)]
    return next((p for p in candidates if p.is_file()), None)


def block(tokens: list[Token], start: int) -> int:
    """The index after the `}` closing the `{` at `start`."""
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index].text == "{":
            depth += 1
        elif tokens[index].text == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    raise UnusableInput("a block does not end", file=str(tokens[start].file), line=tokens[start].line)


def _declarations(vcl: Vcl, tokens: list[Token]) -> None:
    index = 0
    while index < len(tokens):
        token = tokens[index]
        word = token.text
        if word == "vcl" and index + 1 < len(tokens):
            vcl.version = tokens[index + 1].text
            index = _after(tokens, index, ";")
        elif word == "import" and index + 1 < len(tokens):
            vcl.imports.append(tokens[index + 1].text)
            index = _after(tokens, index, ";")
        elif word in ("backend", "probe", "sub", "acl") and index + 1 < len(tokens):
            name = tokens[index + 1]
            opening = next((i for i in range(index + 2, len(tokens)) if tokens[i].text in ("{", ";")), len(tokens))
            if opening == len(tokens) or tokens[opening].text == ";":  # `backend x none;`
                index = opening + 1
                continue
            end = block(tokens, opening)
            body = tokens[opening + 1:end - 1]
            if word == "backend":
                vcl.backends[name.text] = _backend(name, body)
            elif word == "probe":
                vcl.probes.append(name)
            elif word == "sub":
                vcl.subs.setdefault(name.text, []).append(body)
                vcl.sub_tokens.setdefault(name.text, []).append(name)
            index = end
        else:
            index += 1
    for body in vcl.subs.get("vcl_init", []):
        _directors(vcl, body)


def _after(tokens: list[Token], index: int, text: str) -> int:
    while index < len(tokens) and tokens[index].text != text:
        index += 1
    return index + 1


def _backend(name: Token, body: list[Token]) -> Backend:
    backend = Backend(name.text, name)
    index = 0
    while index + 2 < len(body):
        if body[index].text == "." and body[index + 1].kind == "word" and body[index + 2].text == "=":
            attr, start = body[index + 1], index + 3
            if start < len(body) and body[start].text == "{":
                end = block(body, start)
                value = body[start:end]
                index = end + (1 if end < len(body) and body[end].text == ";" else 0)
            else:
                end = _after(body, start, ";")
                value = body[start:end - 1]
                index = end
            backend.attrs[attr.text] = (value, attr)
        else:
            index += 1
    return backend


def _directors(vcl: Vcl, body: list[Token]) -> None:
    """`new NAME = directors.KIND(...);` and `NAME.add_backend(MEMBER ...);` in vcl_init."""
    for index, token in enumerate(body):
        if token.text == "new" and index + 3 < len(body) and body[index + 2].text == "=":
            kind = body[index + 3].text.rsplit(".", 1)[-1]
            vcl.directors[body[index + 1].text] = Director(body[index + 1].text, kind, body[index + 1])
        elif token.kind == "word" and token.text.endswith(".add_backend") and index + 2 < len(body):
            director = vcl.directors.get(token.text[: -len(".add_backend")])
            if director is not None:
                director.members.append(body[index + 2].text)
