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


def test_stream_proxy_version_runs_the_release_named_and_a_failure_says_which(pytester) -> None:
    """A config that leaves proxy_buffering and proxy_http_version at nginx's defaults: the
    current release (1.30, HTTP/1.1 to the server) streams it, 1.22 (HTTP/1.0) holds it."""
    pytester.makefile(".conf", defaults="events {}\nhttp { server { listen 80;\n"
                                         "  location /v1/ { proxy_pass http://10.0.0.1:8000; } } }\n")
    selected = ("--stream-config=defaults.conf", "-v", "-k", "buffering")
    current = pytester.runpytest_subprocess(*selected)
    current.assert_outcomes(passed=1, deselected=6)
    old = pytester.runpytest_subprocess(*selected, "--stream-proxy-version=1.22")
    old.assert_outcomes(failed=1, deselected=6)
    old.stdout.fnmatch_lines(["*defaults.conf: buffering*", "*measured on nginx 1.22.* (Debian 12*"])


def test_stream_heartbeat_runs_the_departure_through_the_servers_heartbeats(pytester) -> None:
    """httpd notices a departed client only at its next write: the fixed apache.conf fails the
    disconnect guard without heartbeats, and passes it with `--stream-heartbeat`, which the
    check's evidence shows it ran through."""
    from pathlib import Path

    fixed = Path(__file__).resolve().parents[2] / "proxies" / "fixed" / "apache.conf"
    pytester.makefile(".conf", apache=fixed.read_text())
    selected = ("-v", "-k", "disconnect", "--stream-proxy=apache")
    without = pytester.runpytest_subprocess("--stream-config=apache.conf", *selected)
    without.assert_outcomes(failed=1, deselected=6)
    without.stdout.fnmatch_lines(["*apache.conf: disconnect-not-propagated*", "*--heartbeat*"])
    beating = pytester.runpytest_subprocess("--stream-config=apache.conf", "--stream-heartbeat=0.5", *selected)
    beating.assert_outcomes(passed=1, deselected=6)
