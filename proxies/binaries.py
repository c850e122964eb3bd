"""Where each proxy's binary is, checked once per process (missing or too old: a clear error)."""
from __future__ import annotations

from functools import lru_cache

from proxies.base import ProxyName
from proxies.install import BinaryProblem, check_binary

__all__ = ["BinaryProblem", "binary"]


@lru_cache(maxsize=None)
def binary(proxy: ProxyName) -> str:
    """Absolute path of the proxy's binary; raises BinaryProblem saying what to install."""
    path, _version = check_binary(proxy)
    return path
