"""How the versions of a Python hop's components are read (for a run's provenance): the
distributions installed in the lab's environment, where gunicorn, Django and Jupyter run."""
from __future__ import annotations

from importlib import metadata


def python_versions(*distributions: str) -> dict[str, str]:
    found = {}
    for distribution in distributions:
        try:
            found[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            found[distribution] = "not installed"
    return found
