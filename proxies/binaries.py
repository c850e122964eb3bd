"""Where each proxy's binary is and which version it is, checked once per process (missing or too
old: a clear error). Installing them is proxies/install.py's job."""
from __future__ import annotations

import subprocess
from functools import lru_cache

from proxies.base import ProxyName
from proxies.kind import find_executable
from proxies.kinds import KINDS

__all__ = ["BinaryProblem", "binary", "check_binary", "find_binary"]


class BinaryProblem(RuntimeError):
    """A proxy binary is missing, unusable or too old; the message says what to install."""


def find_binary(name: str) -> str | None:
    """A proxy's binary by the proxy's name (its kind knows where it lies), any other by its own."""
    return KINDS[name].binary.find() if name in KINDS else find_executable(name)


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


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


def check_binary(name: str) -> tuple[str, tuple[int, ...]]:
    """(path, version) of a proxy binary, or BinaryProblem saying what to install."""
    binary = KINDS[name].binary
    path = find_binary(name)
    if path is None:
        raise BinaryProblem(f"{name} not found. Install it: {binary.install_hint}.")
    version = binary_version(name, path)
    if version < binary.minimum:
        have, need = ".".join(map(str, version)), ".".join(map(str, binary.minimum))
        raise BinaryProblem(f"{name} {have} at {path} is too old: streamlab needs {need} or newer. "
                            f"Upgrade it: {binary.install_hint}.")
    return path, version


@lru_cache(maxsize=None)
def binary(proxy: ProxyName) -> str:
    """Absolute path of the proxy's binary; raises BinaryProblem saying what to install."""
    path, _version = check_binary(proxy)
    return path
