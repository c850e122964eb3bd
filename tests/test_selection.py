"""`pytest -k <scenario>` selects exactly that scenario's guards, as the README says it does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labs import catalogue

REPO = Path(__file__).resolve().parent.parent


def collected(*args: str) -> list[str]:
    """The node ids pytest collects with these options (a child pytest, one test at a time)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_k_scenario_selects_only_its_guards() -> None:
    every = collected()
    guards = [node for node in every if node.startswith("tests/test_scenarios.py::")]
    # Two variants, two runtimes (the current release locally, the oldest in containers).
    assert len(guards) == 4 * len(catalogue.SCENARIOS)
    # -k matches a test when the name is part of its id (case-insensitive): only the scenario's
    # own guards, local and in containers, may carry it; no other test names one with hyphens.
    for scenario in catalogue.SCENARIOS:
        carrying = [node for node in every if scenario.name in node.lower()]
        ids = sorted(node.split("[", 1)[1].rstrip("]") for node in carrying if node in guards)
        assert ids == sorted(f"{scenario.name}-{variant}{suffix}" for variant in ("broken", "fixed")
                             for suffix in ("", "-docker")), carrying
        strays = [node for node in carrying if node not in guards]
        assert not strays, f"`pytest -k {scenario.name}` would also select {strays[:5]}"
