from __future__ import annotations

import pytest

from proxies.install import BinaryProblem, check_binary


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
