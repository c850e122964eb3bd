"""The scenario guards: two tests per scenario, generated from the catalogue, in both runtimes.

`pytest -k nginx-buffering` runs `nginx-buffering-broken` (fails if the symptom stops reproducing)
and `nginx-buffering-fixed` (fails if the cure stops working), with the proxies and the server as
local processes, and the same two again in containers (`...-docker`, marked `docker`): those need
a Docker engine and the images (`make images-offline`); without one they are skipped, or fail
under CI. `-m "not docker"` keeps the local pair only.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import pytest

from labs import catalogue
from labs.scenario.runner import Lab
from labs.scenario.model import VARIANTS, Scenario, VariantName, hop_kind
from proxies.apps import is_app
from tests.runtimes import require_images

# make test runs the tests side by side (pytest-xdist, --dist loadscope: a class's or a module's
# tests stay on one worker). The guards of one server (its flags, its runtime) form one class, so
# each server starts once, not once per worker; the many guards of the default server are dealt
# out to DEFAULT_SHARES classes.
DEFAULT_SHARES = 4
PAIRS = [(scenario, variant) for scenario in catalogue.SCENARIOS for variant in VARIANTS]


def _class_name(runtime: str, scenario: Scenario, variant: VariantName, index: int) -> str:
    chosen = scenario.variant(variant)
    words = [runtime, *(arg.strip("-") for arg in chosen.server_args)] or [runtime]
    if chosen.server_nofile is not None:
        words.append(f"nofile{chosen.server_nofile}")
    if len(words) == 1:  # the default server
        words += ["default", str(index % DEFAULT_SHARES)]
    return "TestGuards" + "".join(word.replace("-", " ").title().replace(" ", "") for word in words)


@pytest.fixture(scope="session")
def lab() -> Iterator[Callable[[str], Lab]]:
    """The lab of each runtime, started on first use and shared by the guards of this worker."""
    with contextlib.ExitStack() as stack:
        made: dict[str, Lab] = {}

        def of(runtime: str) -> Lab:
            if runtime not in made:
                made[runtime] = stack.enter_context(Lab(runtime=runtime))
            return made[runtime]
        yield of


def images_of(scenario: Scenario) -> list[str]:
    """The images a scenario's path runs in: the server's, each proxy's, the apps' one."""
    kinds = (hop_kind(hop) for hop in scenario.path)
    return ["server", *dict.fromkeys("apps" if is_app(kind) else kind for kind in kinds)]


def guard(lab: Callable[[str], Lab], scenario: Scenario, variant: VariantName, runtime: str) -> None:
    if runtime == "docker":
        require_images(images_of(scenario))
    run = lab(runtime).run_variant(scenario, variant)
    results = [check(run) for check in scenario.checks(variant)]
    failed = [r for r in results if not r.passed]
    expectation = "symptom" if variant == "broken" else "cure"
    assert not failed, (
        f"{scenario.name} ({variant}, {runtime}): the {expectation} checks failed:\n"
        + "\n".join(f"  - {r.label}: observed {r.observed}" for r in failed)
        + "\nproxy evidence:\n" + "\n".join(f"  {line}" for line in run.evidence[-10:]))


def _guard_classes() -> dict[str, type]:
    params: dict[str, list[object]] = {}
    for runtime, marks in (("local", ()), ("docker", (pytest.mark.docker,))):
        for index, (scenario, variant) in enumerate(PAIRS):
            name = _class_name(runtime, scenario, variant, index)
            suffix = "" if runtime == "local" else "-docker"
            params.setdefault(name, []).append(
                pytest.param(scenario, variant, runtime, id=f"{scenario.name}-{variant}{suffix}", marks=marks))
    classes = {}
    for name, cases in params.items():
        @pytest.mark.parametrize(("scenario", "variant", "runtime"), cases)
        def test_guard(self: object, lab: Callable[[str], Lab], scenario: Scenario, variant: VariantName,
                       runtime: str) -> None:
            guard(lab, scenario, variant, runtime)
        classes[name] = type(name, (), {"test_guard": test_guard, "__doc__": f"The guards of {name}."})
    return classes


globals().update(_guard_classes())
