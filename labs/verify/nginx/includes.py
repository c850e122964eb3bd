"""Where an nginx `include` finds its files when the config is read here, not where it was deployed.

nginx resolves a relative include against its conf prefix and globs absolute ones on the machine
it runs on. A config checked out of a repository was written for another machine: its
`/etc/nginx/conf.d/*.conf` means the files the project mounts there (usually shipped beside the
config), not this machine's. So, unless the config itself lives in this machine's `/etc/nginx`:
a path under `/etc/nginx` is looked for beside the entry file by its tail (`conf.d/*.conf`,
`snippets/ssl.conf`), then among the files the platform ships; any other absolute path is used
when it exists here, else looked for by its tail. An include that finds nothing is missing
(nginx would refuse to start): it is reported by name and left out of the run.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from labs.verify.nginx.platforms import CONF_DIR, PLATFORMS, Platform

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Layout:
    conf_dir: str  # what relative includes resolve against (nginx's conf prefix)
    entry_dir: str  # the folder of the file the user gave (the project's checkout)
    platform: Platform | None  # the site file's platform, whose stock files are read from here
    deployed_here: bool  # the config lives in this machine's /etc/nginx: paths mean this machine

    @classmethod
    def for_entry(cls, entry: str, platform: Platform | None) -> "Layout":
        entry = os.path.abspath(entry)
        here = os.path.realpath(entry).startswith(CONF_DIR + os.sep)
        conf_dir = CONF_DIR if platform is not None else os.path.dirname(entry)
        return cls(conf_dir, os.path.dirname(entry), platform, here)


def resolve(pattern: str, layout: Layout) -> list[str] | None:
    """The files `include pattern` reads here, sorted as nginx's glob does; None: none, and the
    pattern names one file (nginx would stop with "open() failed")."""
    is_glob = any(c in pattern for c in GLOB_CHARS)
    if layout.deployed_here:
        found = _glob(os.path.join(layout.conf_dir, pattern))
    elif os.path.isabs(pattern):
        path = os.path.normpath(pattern)
        found = (_glob(path) if not path.startswith(CONF_DIR + os.sep) and _glob(path) else
                 _beside_entry(path, layout) or _shipped(path, layout))
    else:  # nginx's conf prefix where it is deployed: beside the entry here, or the platform's
        deployed = os.path.normpath(os.path.join(CONF_DIR, pattern))
        found = (_glob(os.path.join(layout.entry_dir, pattern)) or _beside_entry(deployed, layout)
                 or _shipped(deployed, layout))
    if found:
        return found
    return [] if is_glob else None


def _beside_entry(path: str, layout: Layout) -> list[str]:
    """The deployed path's tail beside the entry: conf.d/*.conf, then the file's own name."""
    parts = PurePosixPath(path).parts[1:]
    tails = [os.path.join(*parts[i:]) for i in range(len(parts) - 1) if len(parts) - i >= 2]
    if not any(c in parts[-1] for c in GLOB_CHARS):
        tails.append(parts[-1])  # a single file may sit right beside the entry
    for tail in tails:
        found = _glob(os.path.join(layout.entry_dir, tail))
        if found:
            return found
    return []


def _shipped(path: str, layout: Layout) -> list[str]:
    if not path.startswith(CONF_DIR + os.sep):
        return []
    relative = os.path.relpath(path, CONF_DIR)
    # A whole config's platform is unknown: what Debian ships (this machine's nginx) stands in;
    # never its sites or conf.d, which are this machine's own servers, not the user's.
    platform = layout.platform or PLATFORMS["debian"]
    if not platform.ships_file(relative):
        return []  # the platform has no such file: this machine's copy would hide that
    return _glob(path)


def _glob(path: str) -> list[str]:
    return sorted(p for p in glob.glob(path) if os.path.isfile(p))
