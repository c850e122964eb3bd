"""Host files an offline image needs beyond its binary and the libraries `ldd` lists for it: the
helpers a proxy kind's `Image.extra_files` is written with (Apache's module folder, Varnish's
compiler toolchain), and which of those files need their own libraries."""
from __future__ import annotations

import os
import subprocess
from typing import Iterable


def package_files(packages: Iterable[str]) -> list[str]:
    """The regular files (and symlinks to them) the installed Debian packages own."""
    result = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"dpkg -L {' '.join(packages)} failed (an offline image needs their "
                           f"files): {result.stderr.strip()[:300]}")
    return [line for line in result.stdout.splitlines() if os.path.isfile(line)]


def folder_files(folder: str) -> list[str]:
    return [os.path.join(base, name) for base, _dirs, names in os.walk(folder) for name in names]


def needs_ldd(path: str) -> bool:
    """Executables and shared objects: their libraries must be in the image too."""
    name = os.path.basename(path)
    return os.access(path, os.X_OK) and not name.endswith((".a", ".o", ".h")) or ".so" in name
