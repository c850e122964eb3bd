"""The files an HAProxy config names beside itself, as they run here.

Pattern and map files (`-f FILE`, `map_beg(FILE,...)`) and the files of a `return` rule (`file`,
`lf-file`, `errorfile`) or an `errorfile` are copied into the run when found beside the config
(labs/verify/haproxy/acl.py `pattern_file`), as includes are; else a stand-in says what the reading
assumed: a pattern file that matches the judged request, an empty map, an empty reply. Nothing is
written here: each file is an entry of the rewrite's `files`, written after the loopback check.
"""
from __future__ import annotations

import re
from pathlib import Path

from labs.verify.haproxy import acl
from labs.verify.haproxy.config import HaproxyConfig, Statement
from labs.verify.route import Request

FILE_REF = re.compile(r"\b((?:map(?:_\w+)?|set-map|del-map|add-acl|del-acl)\()([^,)\s]+)")
# The `return` action's payload files (docs.haproxy.org/2.6/configuration.html#4.2-http-request%20return).
REPLY_FILES = ("file", "lf-file", "errorfile")


class RunFiles:
    """The files the config names, as they run here (copied, or a stand-in): `written` holds them
    as entries of the rewrite's `files`; the stand-in for a pattern file matches `request`, the
    request the route was chosen for."""

    def __init__(self, config: HaproxyConfig, folder: Path, request: Request) -> None:
        self.config, self.folder, self.request = config, folder, request
        self.written: dict[str, tuple[str, str, Path]] = {}
        self.placed: dict[tuple[str, str], Path] = {}

    def relocate(self, raw: str, key: str, statement: Statement, note) -> str:
        text = raw[raw.index(key):] if key in raw else " ".join(statement.words)
        words = statement.words
        for index, word in enumerate(words[:-1]):
            if word == "-f":
                braces = [at for at, w in enumerate(words[:index]) if w.lstrip("!") == "{"]
                fetch = words[braces[-1] + 1] if braces else words[2] if words[0] == "acl" else ""
                method = words[words.index("-m") + 1] if "-m" in words[:-1] else None
                text = text.replace(words[index + 1], str(self.place(words[index + 1], "acl", fetch, method,
                                                                      "-M" in words, note)), 1)
        for found in FILE_REF.finditer(" ".join(words)):
            text = text.replace(found[2], str(self.place(found[2], "map", "", None, True, note)), 1)
        return text

    def reply(self, text: str, words: list[str], note) -> str:
        """A `return` rule's payload file, found beside the config; else an empty payload (for
        `errorfile`, a bare response of the rule's status) stands in, and a note says so."""
        for index, word in enumerate(words[:-1]):
            if word not in REPLY_FILES:
                continue
            name = words[index + 1]
            found = acl.pattern_file(name, self.config.file.parent)
            if found is not None:
                placed = self.copy(name, found)
            else:
                status = words[words.index("status") + 1] if "status" in words[:-1] else "200"
                placed = self.copy(name, None, f"HTTP/1.0 {status} \r\ncontent-length: 0\r\n\r\n"
                                   if word == "errorfile" else "")
                note(f"{name} is not beside the config: an empty reply stands in for it (the rule is "
                     "kept: HAProxy still answers what it answers)")
            text = text.replace(name, str(placed), 1)
        return text

    def copy(self, name: str, found: Path | None, stand_in: str = "", kind: str = "file") -> Path:
        """`found` (or, when it is None, the stand-in) as a file of the run, once per name and kind."""
        if (name, kind) not in self.placed:
            target = self.folder / "conf" / "files" / f"{len(self.placed)}-{Path(name).name}"
            if found is not None:
                content = found.read_text(errors="replace")
                self.written[str(found)] = (content, content, target)
            else:
                self.written[f"{name} (not here: a stand-in)"] = ("", stand_in, target)
            self.placed[(name, kind)] = target
        return self.placed[(name, kind)]

    def place(self, name: str, kind: str, fetch: str, method: str | None, as_map: bool, note) -> Path:
        if (name, kind) in self.placed:
            return self.placed[(name, kind)]
        found = acl.pattern_file(name, self.config.file.parent)
        if found is None:
            note(f"{name} is not beside the config: " + (
                "an empty map stands in for it (its default is used, as the reading judged)" if kind == "map"
                else "a stand-in that matches the judged request is used (the reading took the ACL as true)"))
        return self.copy(name, found, "" if found else self._stand_in(kind, fetch, method, as_map), kind)

    def _stand_in(self, kind: str, fetch: str, method: str | None, as_map: bool) -> str:
        if kind == "map":
            return ""
        taken = acl.sample(fetch, self.request)
        if taken is None or taken[1] is None:
            return ""
        value, method = taken[1], method or taken[2]
        line = {"reg": re.escape(value), "len": str(len(value))}.get(method, value)
        return f"{line} x\n" if as_map else f"{line}\n"
