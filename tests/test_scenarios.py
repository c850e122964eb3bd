"""The scenario guards: two tests per scenario, generated from the catalogue, in both runtimes.

`pytest -k nginx-buffering` runs `nginx-buffering-broken` (fails if the symptom stops reproducing)
and `nginx-buffering-fixed` (fails if the cure stops working), with the proxies and the server as
local processes on each proxy's current release, and the same two again in containers
(`...-docker`, marked `docker`) on the oldest release (Debian 12's): those need a Docker engine
and the images (`make images-offline`); without one they are skipped, or fail under CI.
`-m "not docker"` keeps the local pair only. So every scenario is guarded on both releases, the
older one in its containers; where the newer release fixed the symptom itself
(`Since.ends_symptom`), the local broken guard checks that the symptom no longer reproduces there
and the container one that it still does on the older release. (The older release's pair ran
locally too before: the same checks on the same binaries as the container pair, 16 guards and
about 50 s of `make test` that proved nothing the container pass does not.)
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import pytest

from labs import catalogue
from labs.scenario.runner import Lab
from labs.scenario.model import VARIANTS, Scenario, VariantName
from labs.lab.hops import hop_kind
from proxies.apps import is_app
from proxies.kinds import choose_releases
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


# The containers carry the oldest release (Debian 12's; each release has its own image): what they
# prove beyond the local pass is the runtime, which no release changes, so with the local pass on
# the current one each scenario is measured on both without running twice (docs/testing.md).
DOCKER_RELEASES = "oldest"


@pytest.fixture(scope="session")
def lab() -> Iterator[Callable[[str, str], Lab]]:
    """The lab of each runtime and release choice, started on first use and shared by the guards
    of this worker."""
    with contextlib.ExitStack() as stack:
        made: dict[tuple[str, str], Lab] = {}

        def of(runtime: str, releases: str = "current") -> Lab:
            if (runtime, releases) not in made:
                made[runtime, releases] = stack.enter_context(Lab(runtime=runtime, proxy_version=releases))
            return made[runtime, releases]
        yield of


def images_of(scenario: Scenario) -> list[str]:
    """The images a scenario's path runs in: the server's, each proxy's, the apps' one."""
    kinds = (hop_kind(hop) for hop in scenario.path)
    return ["server", *dict.fromkeys("apps" if is_app(kind) else kind for kind in kinds)]




def guard(lab: Callable[[str, str], Lab], scenario: Scenario, variant: VariantName, runtime: str,
          releases: str = "current") -> None:
    if runtime == "docker":
        services = images_of(scenario)
        require_images(services, choose_releases(releases, services, strict=False))
    run = lab(runtime, releases).run_variant(scenario, variant)
    results = [check(run) for check in scenario.checks(variant)]
    failed = [r for r in results if not r.passed]
    if variant == "broken" and scenario.symptom_ended(
            choose_releases(releases, [hop_kind(hop) for hop in scenario.path], strict=False)):
        # The release fixed it: the broken config must no longer show the whole symptom.
        assert failed, (
            f"{scenario.name} (broken, {runtime}, releases {releases}): the symptom reproduced on a "
            f"release that fixed it ({'; '.join(c.what for c in scenario.since if c.ends_symptom)}):\n"
            + "\n".join(f"  - {r.label}: observed {r.observed}" for r in results))
        return
    expectation = "symptom" if variant == "broken" else "cure"
    assert not failed, (
        f"{scenario.name} ({variant}, {runtime}, releases {releases}): the {expectation} checks failed:\n"
        + "\n".join(f"  - {r.label}: observed {r.observed}" for r in failed)
        + "\nproxy evidence:\n" + "\n".join(f"  {line}" for line in run.evidence[-10:]))


def _guard_classes() -> dict[str, type]:
    params: dict[str, list[object]] = {}
    for runtime, marks in (("local", ()), ("docker", (pytest.mark.docker,))):
        for index, (scenario, variant) in enumerate(PAIRS):
            name = _class_name(runtime, scenario, variant, index)
            if runtime == "docker":
                runs = [(DOCKER_RELEASES, "-docker")]
            else:
                runs = [("current", "")]
            for releases, suffix in runs:
                params.setdefault(name, []).append(pytest.param(
                    scenario, variant, runtime, releases, id=f"{scenario.name}-{variant}{suffix}", marks=marks))
    classes = {}
    for name, cases in params.items():
        @pytest.mark.parametrize(("scenario", "variant", "runtime", "releases"), cases)
        def test_guard(self: object, lab: Callable[[str, str], Lab], scenario: Scenario, variant: VariantName,
                       runtime: str, releases: str) -> None:
            guard(lab, scenario, variant, runtime, releases)
        classes[name] = type(name, (), {"test_guard": test_guard, "__doc__": f"The guards of {name}."})
    return classes


globals().update(_guard_classes())
