"""Each scenario's checks, on hand-made runs (tests/labs/handmade_runs.py), in seconds: they accept
a run of their own outcome and reject the other's (the symptom for the broken variant, the cure
for the fixed one), and where the scenario applies a stress (a silence, a long stream, a load, a
departure, a paced stream), a run without it is rejected too: a cure cannot pass vacuously.
The declarations themselves are checked in tests/labs/test_catalogue.py."""
from __future__ import annotations

import pytest

from labs import catalogue
from labs.scenario.model import VARIANTS, Check, Run, Scenario, VariantName
from tests.ids import other_id
from tests.labs.handmade_runs import HANDMADE, Handmade, Shapes


def judged(checks: tuple[Check, ...], run: Run) -> list[str]:
    """The checks that failed on `run`, with what they observed."""
    return [f"{r.label}: {r.observed}" for r in (check(run) for check in checks) if not r.passed]


def handmade(scenario: Scenario) -> Handmade:
    if scenario.name not in HANDMADE:
        pytest.fail(f"{scenario.name} has no hand-made runs: add its symptom and cure shapes to "
                    "tests/labs/handmade_runs.py")
    return HANDMADE[scenario.name]


# ---- the checks, on hand-made runs -----------------------------------------------------------

BOTH = [pytest.param(scenario, variant, id=other_id(scenario.name, variant))
        for scenario in catalogue.SCENARIOS for variant in VARIANTS]
EXPECTED = {"broken": "the symptom", "fixed": "the cure"}


def made(scenario: Scenario, variant: VariantName, without_stress: bool = False) -> Run | None:
    """The hand-made run of this variant's outcome (its symptom or its cure), or of that outcome
    without the scenario's stress (None where the scenario declares none)."""
    runs = handmade(scenario)
    if without_stress:
        make = runs.symptom_without_stress if variant == "broken" else runs.cure_without_stress
    else:
        make = runs.symptom if variant == "broken" else runs.cure
    return None if make is None else make(Shapes(scenario, variant))


@pytest.mark.parametrize(("scenario", "variant"), BOTH)
def test_checks_accept_their_own_outcome_and_reject_the_other(scenario: Scenario, variant: VariantName) -> None:
    other: VariantName = "fixed" if variant == "broken" else "broken"
    checks = scenario.checks(variant)
    own = made(scenario, variant)
    assert own is not None and not judged(checks, own), judged(checks, own) if own else "no run"
    theirs = made(scenario, other)
    assert theirs is not None and judged(checks, theirs), (
        f"the {variant} checks pass on a hand-made run of {EXPECTED[other]}")


# Scenarios that apply no stress beyond what their own checks measure (an exact text, a leaked
# stop, an in-band error) have no run without it.
STRESSED = [param for param in BOTH if param.values[0].name in HANDMADE
            and made(*param.values, without_stress=True) is not None]  # type: ignore[arg-type]


@pytest.mark.parametrize(("scenario", "variant"), STRESSED)
def test_an_outcome_without_the_stress_is_rejected(scenario: Scenario, variant: VariantName) -> None:
    run = made(scenario, variant, without_stress=True)
    assert run is not None and judged(scenario.checks(variant), run), (
        f"the {variant} checks pass on {EXPECTED[variant]} of a run where the scenario's stress never happened")


def test_every_scenario_with_a_timeout_limit_or_departure_proves_its_stress() -> None:
    """The kinds whose cure is 'every stream completes' must say what they survived."""
    stress_kinds = {"idle-timeout", "total-timeout", "connection-limit", "disconnect-not-propagated"}
    for scenario in catalogue.SCENARIOS:
        if scenario.kind in stress_kinds:
            assert HANDMADE[scenario.name].cure_without_stress is not None, scenario.name
            assert HANDMADE[scenario.name].symptom_without_stress is not None, scenario.name
