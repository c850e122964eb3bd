"""The scenario guards: two tests per scenario, generated from the catalogue.

`pytest -k nginx-buffering` runs `nginx-buffering-broken` (fails if the symptom stops reproducing)
and `nginx-buffering-fixed` (fails if the cure stops working).
"""
from __future__ import annotations

import pytest

from labs import catalogue
from labs.runner import Lab
from labs.scenario import VARIANTS, Scenario, VariantName

GUARDS = [pytest.param(scenario, variant, id=f"{scenario.name}-{variant}")
          for scenario in catalogue.SCENARIOS for variant in VARIANTS]


@pytest.fixture(scope="session")
def lab() -> Lab:
    with Lab() as shared:
        yield shared


@pytest.mark.parametrize(("scenario", "variant"), GUARDS)
def test_guard(lab: Lab, scenario: Scenario, variant: VariantName) -> None:
    run = lab.run_variant(scenario, variant)
    results = [check(run) for check in scenario.checks(variant)]
    failed = [r for r in results if not r.passed]
    expectation = "symptom" if variant == "broken" else "cure"
    assert not failed, (
        f"{scenario.name} ({variant}): the {expectation} checks failed:\n"
        + "\n".join(f"  - {r.label}: observed {r.observed}" for r in failed)
        + "\nproxy evidence:\n" + "\n".join(f"  {line}" for line in run.evidence[-10:]))
