"""The optional parts of the install (pyproject.toml's extras), checked without importing them.

    missing("model")            # ["torch", "transformers"]: what of the extra is not installed
    require("model", "the transformers engine")   # MissingExtra with the one-line message

The base install runs `labs verify|probe|load` and `python -m server --engine synthetic`; the
transformers engine and the model builder need the `model` extra (torch is pinned to the CPU
build by `make setup`: a plain `pip install torch` pulls a multi-GB CUDA build on a CPU machine).
"""
from __future__ import annotations

import importlib.util

# The modules each extra brings (import names, in the order a message lists them).
EXTRAS: dict[str, tuple[str, ...]] = {
    "model": ("torch", "transformers", "safetensors"),
    "locust": ("locust",),
    "apps": ("gunicorn", "flask", "requests"),
}


class MissingExtra(RuntimeError):
    """A part of the install is missing; str() is the one line to show (exit status 2)."""


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is broken or half-installed
        return False


def missing(extra: str) -> list[str]:
    return [module for module in EXTRAS[extra] if not installed(module)]


def require(extra: str, what: str) -> None:
    """Raise MissingExtra naming what needs the extra when any of its modules is missing."""
    absent = missing(extra)
    if absent:
        raise MissingExtra(f"{what} needs {', '.join(absent)} (not installed): "
                           f"pip install 'streamlab[{extra}]'")
