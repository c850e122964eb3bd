from __future__ import annotations

import pytest

from proxies.binaries import BinaryProblem, check_binary

# The `runtime` (local, docker) and `upstream` (the fake) fixtures are tests/conftest.py's.


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
