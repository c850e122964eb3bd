"""The ModSecurity rules an nginx config names with `modsecurity_rules_file`, as verify runs them:
each file (and every file it `Include`s, the OWASP rule set's too) copied into the run's folder
where the config's own files go, its logs written there, and the data files its rules read
(`@pmFromFile`, named relative to the rule's file) copied beside the copies, as the Apache
rewrite does (labs/verify/apache/rewrite.py). What is not here is left as written: nginx refuses
the config and the run says so."""
from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path
from typing import Callable

from labs.verify.modsecurity import DATA_FILES

# ModSecurity's own files and folders: into the run's folder, not the machine's /var/log.
IN_FOLDER = {"secauditlog": "modsec_audit.log", "secauditlog2": "modsec_audit2.log",
             "secdebuglog": "modsec_debug.log", "secauditlogstoragedir": "", "secdatadir": "", "sectmpdir": "",
             "secuploaddir": ""}
_MAX_DEPTH = 8


def mirror_rules(path: str, folder: Path, mirror: Callable[[str], Path],
                 files: dict[str, tuple[str, str, Path]], data: dict[Path, Path], depth: int = 0) -> Path:
    """Add `path`'s copy (and its includes') to `files` (user file -> (old, new, copy)) and its data
    files to `data` (original -> copy); returns where the copy goes."""
    copy = mirror(path)
    if path in files or depth > _MAX_DEPTH:
        return copy
    try:
        original = Path(path).read_text(errors="replace")
    except OSError:
        return Path(path)  # not here: left as written
    files[path] = (original, original, copy)  # claimed before its includes (an include cycle stops here)
    lines = [_line(line, path, folder, mirror, files, data, depth) for line in original.splitlines()]
    files[path] = (original, "\n".join(lines) + "\n", copy)
    for name in DATA_FILES.findall(original):
        source = Path(path).parent / name
        if source.is_file():
            data[source] = mirror(str(source))
    return copy


def _line(line: str, path: str, folder: Path, mirror: Callable[[str], Path],
          files: dict[str, tuple[str, str, Path]], data: dict[Path, Path], depth: int) -> str:
    words = line.split()
    if not words or words[0].startswith("#"):
        return line
    key = words[0].lower()
    if key in IN_FOLDER and len(words) > 1:
        return f"{words[0]} {folder / IN_FOLDER[key] if IN_FOLDER[key] else folder}"
    if key == "include" and len(words) > 1:
        pattern = words[1].strip("\"'")
        pattern = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(path), pattern)
        matches = sorted(glob.glob(pattern))
        if not matches:
            return line
        return "\n".join(f"{words[0]} {mirror_rules(match, folder, mirror, files, data, depth + 1)}" for match in matches)
    return line


def copy_data(data: dict[Path, Path]) -> None:
    for source, copy in data.items():
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy)
