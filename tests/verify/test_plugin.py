"""The pytest plugin's `--stream-config` on the real `labs verify`, as a user's CI runs it: a
config with the buffering fault fails its test with the directive and the fix, the fixed config
passes, and only the checks for the selected kind run (a few seconds, not a whole verify)."""
from __future__ import annotations

import pytest

from labs.catalogue.render import rendered

pytestmark = pytest.mark.slow


def test_stream_config_runs_the_real_verify_for_the_selected_kind(pytester) -> None:
    for side in ("broken", "fixed"):
        pytester.makefile(".conf", **{side: rendered("nginx-buffering", side)[1]})
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--stream-config=broken.conf", "--stream-config=fixed.conf", "-v", "-k", "buffering or mine")
    result.assert_outcomes(passed=2, failed=1, deselected=2 * 6)
    result.stdout.fnmatch_lines([
        "*test_stream_config[[]broken.conf-buffering[]] FAILED*",
        "*test_stream_config[[]fixed.conf-buffering[]] PASSED*",
        "broken.conf: buffering (broken.conf:*): *TTFT*",
        "fix: *proxy_buffering off*",
        "see: make lab-nginx-buffering",
    ])
