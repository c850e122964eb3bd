"""The versions of a proxy the lab runs, declared once in its kind (`ProxyKind.releases`), and where
each one's files lie on this machine.

A release is either this machine's own package (Debian 12's, the kind's `Binary`), or the
current stable release of that proxy from another Debian suite (sid, trixie). Such a release is
unpacked once per machine, with its libraries and its C library, into `.proxies/<proxy>-<series>/`
(proxies.unpack does it, by need); its programs are copies whose ELF interpreter and library path
point into that folder, so they run on this host as any binary does, re-executing themselves
included (HAProxy's master-worker reload), and the unpacked folder itself is what a container
image of that release is made from. docs/environment.md says why, with the measurements.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from server.locations import cache_dir, checkout

# Overrides where unpacked releases live (default: .proxies/ in the checkout, else the user's cache).
FOLDER_VARIABLE = "STREAMLAB_PROXIES_DIR"
# The lab's choice of releases for a run: `current` (the default), `oldest`, `X.Y` or `PROXY=X.Y,...`
# (labs.versions reads it; `--proxy-version` sets it).
CHOICE_VARIABLE = "LAB_PROXY_VERSION"
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
LOADER = "usr/lib64/ld-linux-x86-64.so.2"


def releases_folder() -> Path:
    configured = os.environ.get(FOLDER_VARIABLE)
    if configured:
        return Path(configured)
    root = checkout()
    return root / ".proxies" if root is not None else cache_dir() / "proxies"


@dataclass(frozen=True)
class Release:
    """One version of a proxy the lab runs.

    proxy: the kind's name (its folder here is named after it and the series).
    series: the major.minor it is (the binary found must be of it, e.g. "1.30").
    source: where it comes from, as a report says it ("Debian 12", "Debian sid").
    suite: the Debian suite its packages are unpacked from; None: this machine's own binary.
    packages: the Debian packages unpacked (their dependencies come along).
    programs: where the packages put the binary and the tools the lab runs beside it (the
        binary first), as absolute paths inside the release's root.
    image: the official image of that version (the docker runtime's first choice).
    """

    proxy: str
    series: str
    source: str
    suite: str | None = None
    packages: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    image: str = ""

    @property
    def unpacked(self) -> bool:
        """Whether its files come from another Debian suite, unpacked into the release's folder."""
        return self.suite is not None

    @property
    def label(self) -> str:
        return f"{self.series} ({self.source})"

    @property
    def folder(self) -> Path:
        return releases_folder() / f"{self.proxy}-{self.series}"

    @property
    def root(self) -> Path:
        """The unpacked packages, laid out as on a Debian system of that suite."""
        return self.folder / "root"

    @property
    def bin(self) -> Path:
        """Its programs, patched to load their libraries from `root`."""
        return self.folder / "bin"

    def program(self, name: str) -> str | None:
        """The path of one of its programs (by file name) on this machine, if it is there."""
        if not self.unpacked:
            return None
        candidate = self.bin / name
        return str(candidate) if os.access(candidate, os.X_OK) else None

    def installed_version(self) -> str | None:
        """The exact version unpacked (from its record), None when it is not unpacked here."""
        try:
            return json.loads((self.folder / "release.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            return None

    def in_root(self, path: str) -> Path:
        """A path of the release's own file system, where it lies here."""
        return self.root / path.lstrip("/")
