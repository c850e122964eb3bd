"""Where each proxy's binary is and which version it is, checked once per process (missing, too
old, or not of the series its release declares: a clear error). A proxy has a binary per release
(proxies.releases): this machine's own, or an unpacked one. Installing them is proxies/install.py's
and proxies/unpack.py's job."""
from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from proxies.base import ProxyName
from proxies.kind import find_executable
from proxies.kinds import KINDS
from proxies.releases import Release

__all__ = ["BinaryProblem", "binary", "check_binary", "find_binary", "shown_version"]


class BinaryProblem(RuntimeError):
    """A proxy binary is missing, unusable or too old; the message says what to install."""


def find_binary(name: str, series: str | None = None) -> str | None:
    """A proxy's binary by the proxy's name and release (default: its current one; its kind knows
    where it lies), any other program by its own name."""
    if name not in KINDS:
        return find_executable(name)
    release = KINDS[name].release(series)
    if release.unpacked:
        return release.program(Path(release.programs[0]).name)
    return KINDS[name].binary.find()


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def shown_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def binary_version(name: str, path: str) -> tuple[int, ...]:
    try:
        result = subprocess.run([path, *KINDS[name].binary.version_args], capture_output=True,
                                text=True, timeout=30)
    except OSError as exc:
        raise BinaryProblem(f"{name} at {path} cannot run: {exc}") from None
    output = result.stdout + result.stderr  # nginx -v prints to stderr
    match = KINDS[name].binary.version_pattern.search(output)
    if match is None:
        raise BinaryProblem(f"cannot read the version of {name} at {path} from: {output.strip()[:200]!r}")
    return parse_version(match.group(1))


def _install_hint(name: str, release: Release) -> str:
    if release.unpacked:
        return f"`python -m labs setup {name}` (or `make setup`) unpacks it from Debian {release.suite}"
    return KINDS[name].binary.install_hint


def check_binary(name: str, series: str | None = None) -> tuple[str, tuple[int, ...]]:
    """(path, version) of a proxy's binary for one release (default: the current one), or
    BinaryProblem saying what to install. An unpacked release must be of the series it declares
    (Debian's suite may have moved on); this machine's own may be any version from the minimum
    the template needs, and reports name the one it is."""
    kind = KINDS[name]
    try:
        release = kind.release(series)
    except ValueError as exc:
        raise BinaryProblem(str(exc)) from None
    path = find_binary(name, series)
    if path is None:
        raise BinaryProblem(f"{name} {release.label} not found. Install it: {_install_hint(name, release)}.")
    version = binary_version(name, path)
    if version < kind.binary.minimum:
        have, need = shown_version(version), shown_version(kind.binary.minimum)
        raise BinaryProblem(f"{name} {have} at {path} is too old: streamlab needs {need} or newer. "
                            f"Upgrade it: {kind.binary.install_hint}.")
    if release.unpacked and shown_version(version[:2]) != release.series:
        raise BinaryProblem(f"{name} {shown_version(version)} at {path} is not the {release.label} the lab "
                            f"declares (proxies/{name}/kind.py): Debian {release.suite} has moved on; "
                            f"declare that release there and measure it")
    return path, version


@lru_cache(maxsize=None)
def binary(proxy: ProxyName, series: str | None = None) -> str:
    """Absolute path of the proxy's binary for one release (default: the current one); raises
    BinaryProblem saying what to install."""
    path, _version = check_binary(proxy, series)
    return path
