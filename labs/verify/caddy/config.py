"""A Caddy config as verify reads it: always Caddy's JSON, with a way back to the user's lines.

A Caddyfile goes through Caddy's own adapter (`caddy adapt --adapter caddyfile`): it is never
parsed here, so every directive, snippet and `import` means what it means to Caddy. A `.json`
file (or one whose text is a JSON object) is Caddy's native config, read as is.

The adapter gives no line numbers. `line_of` finds a directive's line by searching the user's
text: in a Caddyfile for the directive's word inside the block it belongs to (the site block,
the `reverse_proxy` block, the global `timeouts` block); in JSON for the key (`"flush_interval"`)
after the object it belongs to. When nothing better is found a setting's `where` is the line of
the block around it (the site block's address line): approximate by design, said here.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.findings import UnusableInput
from labs.verify.model import display_path, read_text
from proxies.binaries import find_binary
from proxies.caddy.kind import KIND as CADDY, state_folders

ADAPT_TIMEOUT_S = 60


@dataclass
class CaddyConfig:
    file: Path
    text: str
    json: dict[str, Any]
    caddyfile: bool  # adapted from a Caddyfile (else the user's own JSON)

    @property
    def shown(self) -> str:
        return display_path(self.file)

    @property
    def servers(self) -> dict[str, dict[str, Any]]:
        return ((self.json.get("apps") or {}).get("http") or {}).get("servers") or {}

    def where(self, line: int | None) -> str:
        return f"{self.shown}:{line}" if line else self.shown

    def line_text(self, line: int | None) -> str | None:
        if not line:
            return None
        return self.text.splitlines()[line - 1].strip()

    def block_end(self, start: int) -> int:
        """The last line of the `{ ... }` block opened on line `start` (1-based; Caddyfile or JSON)."""
        lines = self.text.splitlines()
        depth, opened = 0, False
        for number in range(start, len(lines) + 1):
            for char in _code(lines[number - 1], self.caddyfile):
                if char in "{[" and (char == "{" or not self.caddyfile):
                    depth, opened = depth + 1, True
                elif char in "}]" and (char == "}" or not self.caddyfile):
                    depth -= 1
            if opened and depth <= 0:
                return number
        return len(lines)

    def line_of(self, word: str, within: int | None = None, contains: str | None = None) -> int | None:
        """The first line after `within` (inside its block) that holds `word` (a Caddyfile directive
        opening its line, a JSON key), and `contains` when given."""
        lines = self.text.splitlines()
        start, end = (within, self.block_end(within)) if within else (1, len(lines))
        pattern = (re.compile(rf"^\s*{re.escape(word)}(\s|$|{{)") if self.caddyfile
                   else re.compile(rf'"{re.escape(word)}"\s*:'))
        for number in range(start, end + 1):
            text = lines[number - 1]
            code = _code(text, self.caddyfile)
            if pattern.search(code) and (contains is None or contains.lower() in code.lower()):
                return number
        return None

    def site_line(self, hosts: list[str], listen: list[str]) -> int | None:
        """The line of the site block (Caddyfile) or server (JSON) with these names or addresses."""
        lines = self.text.splitlines()
        names = [h for h in hosts if h] + list(listen)
        for number, text in enumerate(lines, start=1):
            code = _code(text, self.caddyfile).strip()
            if self.caddyfile:
                if not code.endswith("{") or text[:1].isspace():
                    continue
                addresses = code[:-1].replace(",", " ").split()
                bare = [re.sub(r"^\w+://", "", a).split("/")[0] for a in addresses]
                if any(n.lower() in (b.lower() for b in bare) or n in addresses for n in names) or \
                        any(":" + a.rsplit(":", 1)[-1] in bare for a in listen if ":" in a):
                    return number
            elif any(f'"{n}"' in code for n in names):
                return number
        return None


def _code(line: str, caddyfile: bool) -> str:
    """A Caddyfile line without its comment and quoted text (braces inside strings); JSON as is."""
    if not caddyfile:
        return line
    out, quote = [], None
    for char in line:
        if quote:
            if char == quote:
                quote = None
            continue
        if char in ('"', "`"):
            quote = char
            out.append(" ")
            continue
        if char == "#" and (not out or out[-1].isspace()):
            break
        out.append(char)
    return "".join(out)


def is_json(path: Path, text: str) -> bool:
    return path.suffix.lower() == ".json" or text.lstrip().startswith("{\n") and _loads(text) is not None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse(path: Path, series: str | None = None) -> CaddyConfig:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    text = read_text(path)
    if is_json(path, text):
        try:
            data = json.loads(text)
        except ValueError as exc:
            line = getattr(exc, "lineno", None)
            raise UnusableInput(f"not Caddy JSON: {exc}", file=str(path), line=line) from None
        if not isinstance(data, dict):
            raise UnusableInput("not Caddy JSON: the config must be an object", file=str(path))
        return CaddyConfig(path, text, data, caddyfile=False)
    return CaddyConfig(path, text, adapt(path, series), caddyfile=True)


def adapt(path: Path, series: str | None = None) -> dict[str, Any]:
    """The Caddyfile adapter of the Caddy release that will run it (default: the current one; a
    directive one release renamed is an error in the other); its error names the file and line."""
    binary = find_binary("caddy", series)
    if binary is None:
        raise UnusableInput(f"caddy {CADDY.release(series).label} is needed to read a Caddyfile "
                            f"(`python -m labs setup caddy`)", file=str(path))
    folder = path.resolve().parent
    try:
        result = subprocess.run([binary, "adapt", "--config", str(path.resolve()), "--adapter", "caddyfile"],
                                cwd=folder, capture_output=True, text=True, timeout=ADAPT_TIMEOUT_S,
                                env={**os.environ, **state_folders(f"{folder}/")})
    except subprocess.TimeoutExpired:
        raise UnusableInput("caddy adapt did not answer", file=str(path)) from None
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip()
        file, line = str(path), None
        # 2.6 writes `FILE:LINE - Error...`, 2.11 `..., at FILE:LINE`
        found = re.search(r"(\S+?):(\d+) - ", message) or re.search(r", at (\S+):(\d+)\s*$", message)
        if found:
            named = Path(found[1])
            file = display_path(path) if named.resolve() == path.resolve() else display_path(named)
            line = int(found[2])
        message = message.replace(str(path.resolve()), display_path(path)).removeprefix("Error: ")
        # A directive one release renamed (2.7: buffer_requests -> request_buffers) is valid in
        # the other: say which Caddy read it, and how to ask for another.
        ran = CADDY.release(series)
        others = ", ".join(r.series for r in CADDY.releases if r != ran)
        raise UnusableInput(f"caddy could not adapt the Caddyfile: {message} (read by Caddy {ran.label}; "
                            f"a Caddyfile for another release: --proxy-version {others})", file=file, line=line)
    data = _loads(result.stdout)
    if not isinstance(data, dict):
        raise UnusableInput("caddy adapt gave no JSON config", file=str(path))
    return data


def seconds(value: Any) -> float | None:
    """A Caddy duration (JSON: nanoseconds as an integer, or a Go duration string) in seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return value / 1e9
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text) / 1e9
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"(-?[\d.]+)(ns|us|µs|ms|s|m|h|d)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnusableInput(f"not a Caddy duration: {value!r}")
    return sum(float(n) * units[u] for n, u in parts)


def duration_text(value: Any) -> str:
    """A duration as a Caddyfile spells it ("300s", "100ms", "-1")."""
    s = seconds(value)
    if s is None:
        return ""
    if s < 0:
        return "-1"
    return f"{s * 1000:g}ms" if 0 < s < 1 else f"{s:g}s"
