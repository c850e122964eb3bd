"""Edits on a config's own text, so what runs is the user's file with only the changes shown.

Each edit replaces one statement (from its directive name to its `;` or end of line), comments one
out, or inserts lines; the result is shown as a unified diff, and a line of the rewritten text can
be traced back to the user's line (for the proxy's own error messages).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

MARK = "streamlab verify"


@dataclass
class TextEdits:
    """Pending edits on one file's text; applied from the bottom up so offsets stay valid."""

    original: str
    terminator: str = ";"  # nginx statements end with ';', HAProxy and YAML lines at the newline
    comment: str = "#"
    _edits: list[tuple[int, int, str]] = field(default_factory=list)

    def _line_start(self, line: int) -> int:
        """The offset of `line`'s first character; the text's end for the line after the last,
        also when the file does not end with a newline (many published files do not)."""
        offset = 0
        for _ in range(line - 1):
            newline = self.original.find("\n", offset)
            if newline < 0:
                return len(self.original)
            offset = newline + 1
        return offset

    def _statement(self, line: int, name: str, nth: int = 0) -> tuple[int, int]:
        start_of_line = self._line_start(line)
        end_of_line = self.original.find("\n", start_of_line)
        end_of_line = len(self.original) if end_of_line < 0 else end_of_line
        if self.terminator == "\n":
            match = re.compile(rf"(?<![\w$-]){re.escape(name)}(?![\w-])").search(
                self.original, start_of_line, end_of_line)
            if match is None:
                raise ValueError(f"no {name!r} on line {line}")
            return match.start(), end_of_line
        starts = [at for at in self._statement_starts(start_of_line, end_of_line)
                  if re.match(rf"{re.escape(name)}(?![\w-])", self.original[at:end_of_line])]
        if len(starts) <= nth:
            raise ValueError(f"no {name!r} statement number {nth + 1} on line {line}")
        start = starts[nth]
        quote, index = None, start
        while index < len(self.original):
            char = self.original[index]
            if quote:
                if char == "\\":
                    index += 1
                elif char == quote:
                    quote = None
            elif char in "\"'":
                quote = char
            elif char == self.terminator:
                return start, index + 1
            index += 1
        raise ValueError(f"the {name!r} statement on line {line} does not end")

    def _statement_starts(self, start: int, end: int) -> list[int]:
        """Where statements begin on one line: its first word, and each word after `;`, `{`, `}`
        (outside quotes, before a comment), so `server a:80; server b:80;` is two statements."""
        starts, expect = [], True
        for index, char in self._unquoted(start, end):
            if char in ";{}":
                expect = True
            elif not char.isspace() and expect:
                starts.append(index)
                expect = False
        return starts

    def _unquoted(self, start: int, end: int):
        """(index, char) of the text outside comments and inside no quote (an opening quote is
        yielded: it begins a word), from `start` to `end`."""
        quote, index = None, start
        while index < end:
            char = self.original[index]
            if quote:
                if char == "\\":
                    index += 1
                elif char == quote:
                    quote = None
            elif char == "#":
                newline = self.original.find("\n", index, end)
                if newline < 0:
                    return
                index = newline
                continue
            else:
                if char in "\"'":
                    quote = char
                yield index, char
            index += 1

    def replace(self, line: int, name: str, new: str, nth: int = 0) -> None:
        """Replace the statement `name ...;` that starts on `line` (the `nth` of that name on the
        line) with `new` (no terminator)."""
        start, end = self._statement(line, name, nth)
        tail = self.terminator if self.terminator != "\n" else ""
        self._edits.append((start, end, new + tail))

    def remove(self, line: int, name: str, why: str, nth: int = 0) -> None:
        """Comment the statement out, saying why (the diff shows it). Several statements on the
        line: the comment would swallow the rest of the line, so it becomes a no-op comment block."""
        start, end = self._statement(line, name, nth)
        old = self.original[start:end].replace("\n", " ")
        rest = self.original[end:self.original.find("\n", end) if "\n" in self.original[end:] else len(self.original)]
        if self.terminator != "\n" and rest.strip() and not rest.strip().startswith(self.comment):
            # Other statements follow on this line: a `#` would comment them out too.
            self._edits.append((start, end, f"\n{self.comment} {old}  {self.comment} {MARK}: {why}\n"))
            return
        self._edits.append((start, end, f"{self.comment} {old}  {self.comment} {MARK}: {why}"))

    def replace_span(self, start: int, end: int, new: str) -> None:
        """Replace the text between two offsets (a block a statement edit cannot delimit)."""
        self._edits.append((start, end, new))

    def insert_after(self, line: int, lines: list[str], indent: str = "    ") -> None:
        """New lines after `line` (0: at the top of the file)."""
        at = self._line_start(line + 1) if line else 0
        text = "".join(f"{indent}{item}\n" for item in lines)
        if at == len(self.original) and not self.original.endswith("\n"):
            text = "\n" + text
        self._edits.append((at, at, text))

    def insert_in_block(self, line: int, name: str, lines: list[str], indent: str = "    ") -> None:
        """New lines right after the `{` that opens the block `name` starting on `line`."""
        start, _ = self._statement_start(line, name)
        brace = self.original.index("{", start)
        text = "".join(f"\n{indent}{item}" for item in lines)
        end_of_line = self.original.find("\n", brace)
        rest = self.original[brace + 1:end_of_line if end_of_line >= 0 else len(self.original)]
        if rest.strip():  # more on the brace's line (`upstream u { server a; }`): an inserted `#` must not eat it
            text += "\n" + indent
        self._edits.append((brace + 1, brace + 1, text))

    def insert_at_block_end(self, line: int, name: str, lines: list[str], indent: str = "    ") -> None:
        """New lines right before the `}` that closes the block `name` starting on `line`."""
        start, _ = self._statement_start(line, name)
        depth = 0
        for index, char in self._unquoted(self.original.index("{", start), len(self.original)):
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    self._edits.append((index, index, "".join(f"{indent}{item}\n" for item in lines)))
                    return
        raise ValueError(f"the {name!r} block on line {line} does not end")

    def _statement_start(self, line: int, name: str) -> tuple[int, int]:
        start_of_line = self._line_start(line)
        match = re.compile(rf"(?<![\w$-]){re.escape(name)}(?![\w-])").search(self.original, start_of_line)
        if match is None:
            raise ValueError(f"no {name!r} from line {line}")
        return match.start(), match.end()

    def apply(self) -> str:
        text = self.original
        for start, end, new in sorted(self._edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = text[:start] + new + text[end:]
        return text


def unified_diff(original: str, rewritten: str, name: str) -> str:
    lines = difflib.unified_diff(original.splitlines(keepends=True), rewritten.splitlines(keepends=True),
                                 fromfile=name, tofile=f"{name} (as verify runs it)", n=1)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def original_line(original: str, rewritten: str, line: int) -> int:
    """The user's line that the rewritten text's `line` comes from (nearest one for new lines)."""
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=rewritten.splitlines(), autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if b1 < line <= b2 or (b1 == b2 == line - 1):
            if tag == "equal":
                return a1 + (line - b1)
            return min(a1 + 1, max(a2, 1))
    return line
