from __future__ import annotations

from typing import Iterator

import pytest

from labs.fakes.upstream import FakeUpstream, fake_upstream
from proxies.binaries import BinaryProblem, check_binary
from proxies.runtime import get_runtime
from proxies.runtime.base import Runtime
from tests.runtimes import PROXIES, RUNTIMES, require_images


@pytest.fixture(scope="session", autouse=True)
def proxy_binaries() -> None:
    """Every proxies test needs nginx, HAProxy and Envoy; say clearly which is missing."""
    problems = []
    for name in ("nginx", "haproxy", "envoy"):
        try:
            check_binary(name)
        except BinaryProblem as exc:
            problems.append(str(exc))
    if problems:
        pytest.fail("\n".join(problems) + "\n(run `make setup`)", pytrace=False)


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> Runtime:
    """The runtime under test, from the registry the labs use. Module scope: pytest runs every
    check for one runtime, then for the other, and checks the engine and images once."""
    if request.param == "docker":
        require_images(PROXIES)
    return get_runtime(request.param)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    """The fake upstream (labs.fakes) the proxies under test forward to."""
    with fake_upstream() as server:
        yield server
