"""The Kubernetes manifests of proxies/fixed/kubernetes/ pass `labs verify` as test_fixed.py's
files do (each in the proxy its controller runs, the lab's current release standing in): a module
of its own so that `make test` puts them on another worker (fixed_cases.py says why)."""
from __future__ import annotations

import pytest

from tests.verify.fixed_cases import CLAIMS, passes_verify, programs  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("name", "series", "mode"), [case for case in CLAIMS if case.values[0].startswith("kubernetes/")])
def test_manifest_passes_verify(verify_server, request, programs, name: str, series: str | None, mode: str) -> None:
    passes_verify(verify_server, request, programs, name, series, mode)
