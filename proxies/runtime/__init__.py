"""How the proxies and the model server run: `local` host processes or `docker` containers.

Each runtime is imported on first use (the process helpers both share are `server.processes`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from proxies.runtime.base import Runtime

__all__ = ["get_runtime", "register_runtime"]

_factories: dict[str, Callable[[], "Runtime"]] = {}


def register_runtime(name: str, factory: Callable[[], "Runtime"]) -> None:
    """Make a runtime available by name (the Docker runtime registers itself as "docker")."""
    _factories[name] = factory


def get_runtime(name: str = "local") -> "Runtime":
    # Imported on first use: the Docker runtime is only needed when asked for.
    if name == "local" and name not in _factories:
        from proxies.runtime.local import LocalRuntime
        register_runtime("local", LocalRuntime)
    if name == "docker" and name not in _factories:
        from proxies.runtime.docker import DockerRuntime
        register_runtime("docker", DockerRuntime)
    if name not in _factories:
        raise ValueError(f"unknown runtime {name!r}; known: {', '.join(sorted(_factories)) or 'local'}")
    return _factories[name]()
