"""A proxy's defaults by version: the ones a streaming route depends on, from its CHANGES.

Each kind that reads `--proxy-version` keeps one `DefaultsTable` (labs/verify/<proxy>/versions.py):
the defaults of the oldest version verify reads, and each later version's changes with their
source. The reading judges a config with the defaults of the version it is written for (default:
the binary of the release that runs it, labs/verify/releases.py, said in the output); when those
differ from that binary's (a release stood in for the version asked), the output says which, and
the kind's rewrite writes the intended values into the run where it can, so the measurement stands
for the intended version.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from labs.findings import UnusableInput
from proxies.binaries import BinaryProblem, binary_version

Version = tuple[int, ...]


def shown(version: Version) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class DefaultsTable:
    proxy: str  # as the output names it ("nginx", "HAProxy", "Envoy")
    base: dict[str, str]  # setting -> default in `oldest`, written as a user would write it
    # (first version, what it changed, source): each later version keeps the earlier changes.
    changes: tuple[tuple[Version, dict[str, str], str], ...]
    oldest: Version
    kind: str  # its name in proxies.kinds: how its binary says its version

    def parse(self, text: str) -> Version:
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", text.strip()):
            raise UnusableInput(f"--proxy-version must look like {shown(self.oldest)} or "
                                f"{shown(self.oldest)}.1, not {text!r}")
        version = tuple(int(p) for p in text.strip().split("."))
        if version < self.oldest:
            raise UnusableInput(f"--proxy-version {text}: verify knows {self.proxy}'s defaults from "
                                f"{shown(self.oldest)} on")
        return version

    def defaults(self, version: Version) -> dict[str, str]:
        out = dict(self.base)
        for since, changed, _ in self.changes:
            if version >= since:
                out.update(changed)
        return out

    def changes_between(self, a: Version, b: Version) -> list[tuple[str, str, str, str]]:
        """(setting, default in a, default in b, why) for every default that differs."""
        da, db = self.defaults(a), self.defaults(b)
        why = {name: source for since, changed, source in self.changes if min(a, b) < since <= max(a, b)
               for name in changed}
        return [(name, da[name], db[name], why.get(name, "")) for name in da if da[name] != db[name]]

    def binary_version(self, binary: str | None) -> Version | None:
        return _binary_version(self.kind, binary)

    def chosen(self, asked: str | None, binary: str | None) -> tuple[Version, str]:
        """The version whose defaults the reading uses, and the note that says so (and whether
        the measurement, made with the binary here, stands for it)."""
        here = self.binary_version(binary)
        version = self.parse(asked) if asked else here or self.oldest
        said = f"{self.proxy} {shown(version)}'s defaults" + (" (--proxy-version)" if asked else
                                                              f" (the {self.proxy} that runs it)" if here else
                                                              f" (no {self.proxy} binary here: the oldest verify knows)")
        if here is None or here == version:
            return version, said
        differ = self.changes_between(here, version)
        if not differ:
            return version, (f"{said}; the run uses {self.proxy} {shown(here)}, whose defaults verify "
                             "reads are the same")
        listed = "; ".join(f"{name}: {new!r} there, {old!r} here" for name, old, new, _ in differ)
        return version, (f"{said}; the run uses {self.proxy} {shown(here)}, whose defaults differ "
                         f"({listed}): the rewrite writes {shown(version)}'s values into the run, so "
                         f"the measurement stands for {shown(version)} ({differ[0][3]})")


@functools.lru_cache(maxsize=None)
def _binary_version(kind: str, binary: str | None) -> Version | None:
    """The version of the binary that runs the config here; None when there is none to ask."""
    if binary is None:
        return None
    try:
        return binary_version(kind, binary)
    except BinaryProblem:
        return None
