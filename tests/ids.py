"""Test ids for tests parametrized by scenario that are not its guards.

`pytest -k nginx-buffering` must select exactly that scenario's two guards (tests/test_scenarios.py),
so every other test names the scenario with underscores: `pytest -k nginx_buffering` selects the
catalogue's and verify's tests of it.
"""
from __future__ import annotations


def other_id(name: str, *rest: str) -> str:
    """`nginx-buffering` -> `nginx_buffering` (and `-broken` etc. appended with a hyphen)."""
    return "-".join([name.replace("-", "_"), *rest])
