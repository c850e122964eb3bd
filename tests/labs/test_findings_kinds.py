"""The recipe "add a finding kind" (docs/extending.md), held to the code: the kinds are declared
once, in `labs.findings.kinds.KINDS`, and each row has everything the recipe names.

- its judge is the `judge` of a module of its own in labs/findings/, and every module there that
  is not shared plumbing is some kind's judge;
- its words, and unit tests of its judge (tests/labs/test_findings_judges.py, named after the
  module);
- its catalogue scenario exists, has the kind, and runs the kind's judge both ways in its guard
  (`checks.finding` in the symptom, `checks.no_finding` in the cure); no scenario runs another
  kind's judge than its own, and no scenario names a kind that is not declared;
- verify has a trial and probe a check that look for it.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from labs import catalogue
from labs.findings import FINDING_KINDS, KINDS, Finding, Kind
from labs.probe.run import CHECKS
from labs.verify.trials import CHECK_KINDS
from tests.labs import test_findings_judges

FINDINGS = Path(__file__).resolve().parents[2] / "labs" / "findings"
PLUMBING = {"ci", "__init__", "evidence", "kinds", "report"}  # shared by every kind: no judge of their own
SCENARIOS = {s.name: s for s in catalogue.SCENARIOS}
ROWS = [pytest.param(kind, id=kind.id) for kind in KINDS]


def module_of(kind: Kind) -> str:
    return inspect.getmodule(kind.judge).__name__.rsplit(".", 1)[-1]  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ROWS)
def test_each_kind_has_a_judge_module_words_and_unit_tests(kind: Kind) -> None:
    assert kind.judge.__name__ == "judge" and (FINDINGS / f"{module_of(kind)}.py").is_file()
    assert kind.words.strip()
    tests = [name for name in dir(test_findings_judges) if name.startswith(f"test_{module_of(kind)}_")]
    assert len(tests) >= 2, f"{module_of(kind)}: unit tests of both directions, named test_{module_of(kind)}_..."


def test_every_judge_module_is_one_kinds_and_the_ids_are_unique() -> None:
    judges = {path.stem for path in FINDINGS.glob("*.py")} - PLUMBING
    assert sorted(module_of(k) for k in KINDS) == sorted(judges)
    assert len(set(FINDING_KINDS)) == len(KINDS)


@pytest.mark.parametrize("kind", ROWS)
def test_each_kinds_scenario_runs_its_judge_both_ways(kind: Kind) -> None:
    scenario = SCENARIOS.get(kind.scenario)
    assert scenario is not None and scenario.kind == kind.id, kind.scenario
    assert f"the {kind.id} judge names the fault" in [c.label.split(" (")[0] for c in scenario.symptom_checks]
    assert f"the {kind.id} judge names no fault" in [c.label.split(" (")[0] for c in scenario.cure_checks]


def test_no_scenario_runs_another_kinds_judge_or_names_an_undeclared_kind() -> None:
    for scenario in catalogue.SCENARIOS:
        assert scenario.kind is None or scenario.kind in FINDING_KINDS, scenario.name
        judged = {c.label.split(" judge ")[0].removeprefix("the ")
                  for c in (*scenario.symptom_checks, *scenario.cure_checks) if " judge names " in c.label}
        assert judged <= {scenario.kind}, (scenario.name, judged)


def test_verify_and_probe_look_for_every_kind() -> None:
    assert {k for kinds in CHECK_KINDS.values() for k in kinds} == set(FINDING_KINDS)
    assert {check.kind for check in CHECKS} == set(FINDING_KINDS)


def test_a_finding_of_an_undeclared_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown finding kind 'slowness'"):
        Finding("slowness", "failure", "evidence")
