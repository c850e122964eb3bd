"""The files of proxies/fixed/ on the older releases they claim (`--proxy-version`), as
test_fixed.py verifies them on the current ones: a module of its own so that `make test` puts
them on another worker (fixed_cases.py says why)."""
from __future__ import annotations

import pytest

from tests.verify.fixed_cases import CLAIMS, passes_verify, programs  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("name", "series", "mode"), [case for case in CLAIMS if case.values[1] is not None])
def test_fixed_file_passes_verify_on_an_older_release(verify_server, request, programs, name: str,
                                                      series: str | None, mode: str) -> None:
    passes_verify(verify_server, request, programs, name, series, mode)
