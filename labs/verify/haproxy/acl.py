"""HAProxy conditions and `%[...]` samples, evaluated for the request verify judges.

An ACL is `FETCH [flags] [--] VALUE...`: the fetch gives a sample of the request (its path, its
Host or another header, its method), the match method (`-m str|beg|end|sub|reg|dir|dom|len|found`,
or the one a suffixed fetch such as `path_beg` implies) compares it with each value; `-i` ignores
case, `-f FILE` adds the values of a pattern file and `-M` reads that file as a map (its keys).
Pattern and map files are looked up beside the config (their deployed path under /etc/haproxy, or
their name). The request is the pipeline's (`route.Request`): a `hdr(x-team)` ACL reads the headers
verify's measured requests carry, --header's among them, and a header they lack does not match.
A condition on something verify cannot know is unknown: taken as true, and said in a note.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify import regex as foreign
from labs.verify.haproxy.config import Section
from labs.verify.model import display_path
from labs.verify.route import Request

METHODS = ("str", "beg", "end", "sub", "reg", "dir", "dom", "len", "found", "int", "bool")
FLAGS_WITH_VALUE = ("-m", "-f", "-u")
_PATH_FETCH = re.compile(r"(?P<base>path|url|base|method)(?:_(?P<m>beg|end|sub|reg|dir|dom|len|str))?", re.I)
_HEADER_FETCH = re.compile(
    r"(?:req\.)?f?hdr(?:_(?P<m>beg|end|sub|reg|dir|dom|len|str))?\(\s*(?P<name>[^,)\s]+)\s*(?:,[^)]*)?\)", re.I)
_MAP = re.compile(r"map(?:_(str|beg|end|sub|reg|dir|dom))?$")
BUILTINS = {"TRUE": True, "FALSE": False, "METH_POST": True, "HTTP": True, "METH_GET": False,
            "HTTP_1.1": True, "HTTP_1.0": False, "HTTP_2.0": False, "HTTP_CONTENT": True, "LOCALHOST": True}
UNKNOWN = None


@dataclass
class Evaluation:
    """One request judged against a config's conditions: what it carries, where the config's own
    files are, what the evaluation noticed, and the Host the first host ACL met asks for when
    the request names none (verify's requests then carry that one)."""

    request: Request
    folder: Path
    notes: list[str] = field(default_factory=list)
    host_needed: str | None = None

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def pattern_file(name: str, folder: Path) -> Path | None:
    """A pattern or map file named as on the deployed machine, found beside the config."""
    candidates = []
    path = Path(name)
    if not path.is_absolute():
        candidates.append(folder / path)
    else:
        for base in ("/etc/haproxy", "/usr/local/etc/haproxy"):
            if name.startswith(base + "/"):
                candidates.append(folder / name[len(base) + 1:])
        candidates.append(folder / path.name)
    return next((c for c in candidates if c.is_file()), None)


def file_lines(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(errors="replace").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def map_entries(path: Path) -> list[tuple[str, str]]:
    entries = []
    for line in file_lines(path):
        key, _, value = line.partition(" ") if " " in line else line.partition("\t")
        entries.append((key, value.strip()))
    return entries


def sample(fetch: str, request: Request) -> tuple[str, str | None, str] | None:
    """(what it is, its value for the judged request or None when absent, its implied match
    method); None when verify does not evaluate this fetch."""
    if (found := _HEADER_FETCH.fullmatch(fetch)) is not None:
        name = found["name"].lower()
        return "host" if name == "host" else "header", request.header(name), found["m"] or "str"
    if (found := _PATH_FETCH.fullmatch(fetch)) is not None:
        base = found["base"].lower()
        value = {"method": request.method, "base": f"{request.host}{request.path}" if request.host else None
                 }.get(base, request.path)
        if base == "base" and request.host is None:
            return None
        return base, value, found["m"] or "str"
    return None


def matches(method: str, value: str | None, patterns: list[str], insensitive: bool) -> bool:
    if method == "found":
        return value is not None
    if value is None:
        return False
    if method in ("len", "int"):
        number = len(value) if method == "len" else _int_or_none(value)
        return number is not None and _int_matches(number, patterns)
    if method == "bool":
        return bool(value)
    if insensitive and method != "reg":
        value, patterns = value.lower(), [p.lower() for p in patterns]
    for pattern in patterns:
        if method == "str" and value == pattern or method == "beg" and value.startswith(pattern) \
                or method == "end" and value.endswith(pattern) or method == "sub" and pattern in value:
            return True
        if method == "reg" and _search(pattern, value, insensitive):
            return True
        if method in ("dir", "dom") and _word(value, pattern, "/" if method == "dir" else "."):
            return True
    return False


def _search(pattern: str, value: str, insensitive: bool) -> bool:
    try:
        return foreign.search(pattern, value, insensitive)
    except re.error:
        return False


def _word(value: str, pattern: str, delimiter: str) -> bool:
    """HAProxy's dir/dom match: the pattern, as whole delimited words, somewhere in the value."""
    word = pattern.strip(delimiter)
    return not word or f"{delimiter}{word}{delimiter}" in f"{delimiter}{value.strip(delimiter)}{delimiter}"


def _int_or_none(text: str) -> int | None:
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _int_matches(number: int, patterns: list[str]) -> bool:
    operators = {"eq": int.__eq__, "ge": int.__ge__, "gt": int.__gt__, "le": int.__le__, "lt": int.__lt__}
    if patterns and patterns[0] in operators:
        bound = _int_or_none(patterns[1]) if len(patterns) > 1 else None
        return bound is not None and operators[patterns[0]](number, bound)
    for pattern in patterns:
        low, sep, high = pattern.partition(":")
        if not sep and _int_or_none(pattern) == number:
            return True
        if sep and (low == "" or (_int_or_none(low) or 0) <= number) and (high == "" or number <= (_int_or_none(high) or 0)):
            return True
    return False


def criterion(words: list[str], judged: Evaluation, name: str = "") -> bool | None:
    """One ACL line (`FETCH [flags] VALUE...`) for the judged request; None: verify cannot tell."""
    if not words:
        return UNKNOWN
    fetch, rest = words[0], words[1:]
    insensitive, method, files, as_map, index = False, None, [], False, 0
    while index < len(rest) and rest[index].startswith("-"):
        flag = rest[index]
        if flag == "--":
            index += 1
            break
        if flag in FLAGS_WITH_VALUE:
            if index + 1 >= len(rest):
                judged.note(f"ACL {name or fetch}: {flag} needs a value; the ACL is unknown, taken as true")
                return UNKNOWN
            if flag == "-m":
                method = rest[index + 1]
            elif flag == "-f":
                files.append(rest[index + 1])
            index += 2
            continue
        if flag == "-i":
            insensitive = True
        elif flag == "-M":
            as_map = True
        elif flag != "-n":
            break
        index += 1
    patterns = rest[index:]
    unknown_file = False
    for file in files:
        found = pattern_file(file, judged.folder)
        if found is None:
            judged.note(f"ACL {name or fetch}: its pattern file {file} is not beside the config, so verify "
                        "cannot tell whether it matches; taken as true")
            unknown_file = True
        else:
            patterns += [key for key, _ in map_entries(found)] if as_map else file_lines(found)
    taken = sample(fetch, judged.request)
    if taken is None:
        judged.note(f"ACL on {fetch} is not evaluated; taken as true (the chat route is assumed to match)")
        return UNKNOWN
    kind, value, implied = taken
    method = method or implied
    if method not in METHODS:
        judged.note(f"ACL {name or fetch}: match method -m {method} is not evaluated; taken as true")
        return UNKNOWN
    if kind == "host" and judged.request.host is None:
        if patterns and method in ("str", "dom") and not unknown_file:
            # The chat route is reached with the Host the rule names: verify's requests carry it.
            judged.note(f"the route needs Host {patterns[0]!r} ({fetch}): verify's requests carry it")
            judged.host_needed = judged.host_needed or patterns[0]
        else:
            judged.note(f"ACL on {fetch} asks for a Host verify was not given (--host); taken as true")
        return UNKNOWN
    if kind == "header" and value is None and method != "found":
        judged.note(f"ACL {name or fetch}: verify's request has no such header (--header 'NAME: VALUE' sends "
                    "one), so it does not match")
    if matches(method, value, patterns, insensitive):
        return True
    return UNKNOWN if unknown_file else False


def acls_of(section: Section, path: Path) -> dict[str, list[list[str]]]:
    """A section's named ACLs: each name with its lines (`FETCH [flags] VALUE...`), any of which holds."""
    acls: dict[str, list[list[str]]] = {}
    for statement in section.find("acl"):
        if len(statement.words) < 3:
            raise UnusableInput("an acl needs a name and a criterion (acl NAME FETCH [flags] VALUE...)",
                                file=display_path(path), line=statement.line)
        acls.setdefault(statement.words[1], []).append(statement.words[2:])
    return acls


def condition(words: list[str], acls: dict[str, list[list[str]]], judged: Evaluation) -> bool:
    """`if|unless TERMS` (ACL names, `!`, `||`/`or`, `{ anonymous ACL }`); unknown terms count as true."""
    if not words:
        return True
    negate_all = words[0] == "unless"
    terms = words[1:] if words[0] in ("if", "unless") else words
    result, current, index = False, True, 0
    while index < len(terms):
        term = terms[index]
        if term in ("||", "or"):
            result, current = result or current, True
        elif term.lstrip("!") == "{" or term == "{":
            end = terms.index("}", index) if "}" in terms[index:] else len(terms)
            holds = criterion(terms[index + 1:end], judged)
            current = current and ((True if holds is None else holds) != term.startswith("!"))
            index = end
        else:
            negate = term.startswith("!")
            name = term.lstrip("!")
            if name in acls:
                values = [criterion(c, judged, name) for c in acls[name]]
                holds = True if True in values or None in values else False
            else:
                if name not in BUILTINS:
                    judged.note(f"condition {name!r} is not known to verify; taken as true")
                holds = BUILTINS.get(name, True)
            current = current and (holds != negate)
        index += 1
    result = result or current
    return result != negate_all


def _split_args(text: str) -> list[str]:
    parts, depth, word = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(word)
            word = ""
            continue
        depth += char == "("
        depth -= char == ")"
        word += char
    return [*parts, word]


def expression(expr: str, judged: Evaluation) -> str | None:
    """One `%[fetch,converter,...]` for the judged request; None: no value (or verify cannot tell)."""
    fetch, *converters = [part.strip() for part in _split_args(expr)]
    taken = sample(fetch, judged.request)
    if taken is None or taken[1] is None:
        judged.note(f"%[{expr}]: verify cannot tell its value (it depends on {fetch})")
        return None
    value = taken[1]
    for converter in converters:
        call = re.fullmatch(r"([\w.-]+)(?:\((.*)\))?", converter)
        conv, args = (call[1], _split_args(call[2] or "")) if call else (converter, [])
        if conv in ("lower", "upper"):
            value = value.lower() if conv == "lower" else value.upper()
        elif (kind := _MAP.match(conv)) is not None and args:
            value = _lookup(kind[1] or "str", args[0].strip(), args[1].strip() if len(args) > 1 else None,
                            value, judged, expr)
            if value is None:
                return None
        else:
            judged.note(f"%[{expr}]: converter {conv} is not evaluated by verify")
            return None
    return value


def _lookup(method: str, file: str, default: str | None, value: str, judged: Evaluation, expr: str) -> str | None:
    found = pattern_file(file, judged.folder)
    if found is None:
        judged.note(f"the map {file} (%[{expr}]) is not beside the config, so verify cannot look "
                    f"{value} up in it; " + (f"its default {default!r} is judged" if default else
                                              "the frontend's default_backend is judged"))
        return default
    for key, result in map_entries(found):
        if matches(method, value, [key], False):
            judged.note(f"{value} is found in the map {file} (map_{method}) under {key}: {result}")
            return result
    judged.note(f"{value} is not in the map {file}; " + (f"its default {default!r} is judged" if default
                                                       else "the frontend's default_backend is judged"))
    return default


def log_format(text: str, judged: Evaluation) -> str | None:
    """A backend name written as a log-format string (`be_%[path,map_beg(FILE,default)]`)."""
    out, index = "", 0
    for found in re.finditer(r"%\[([^\]]*)\]", text):
        value = expression(found[1], judged)
        if value is None:
            return None
        out += text[index:found.start()] + value
        index = found.end()
    return out + text[index:]
