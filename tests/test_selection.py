"""`pytest -k <scenario>` selects exactly that scenario's guards, as the README says it does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labs import catalogue

REPO = Path(__file__).resolve().parent.parent


def collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_k_scenario_selects_only_its_guards() -> None:
    selected = collected("-k", "nginx-buffering")
    assert selected and all(node.startswith("tests/test_scenarios.py::test_guard[nginx-buffering-")
                            for node in selected), selected
    # The two guards, and the same two in containers (marked docker: skipped without an engine).
    assert sorted(node.split("[", 1)[1].rstrip("]") for node in selected) == [
        "nginx-buffering-broken", "nginx-buffering-broken-docker",
        "nginx-buffering-fixed", "nginx-buffering-fixed-docker"]
    # Every other scenario too: no test outside the guards carries a scenario's name in its id
    # (-k matches ids by substring), so none would be selected with them.
    every = collected()
    for scenario in catalogue.SCENARIOS:
        strays = [node for node in every if scenario.name in node.lower()
                  and "tests/test_scenarios.py::test_guard[" not in node]
        assert not strays, f"`pytest -k {scenario.name}` would also select {strays[:5]}"
