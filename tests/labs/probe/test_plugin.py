"""The pytest plugin in a user's own suite: `--stream-url` / `--stream-config` become tests.

pytest runs in a child process here (`pytester.runpytest_subprocess`), as in a user's CI: the
plugin is the installed `pytest11` entry point. The path part runs the real probe against a local
chain; the config part stands a fake in for `labs.verify.verify_config` (same signature and
report shape, installed by the user suite's conftest), so it tests the plugin's side alone.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from labs.probe import CHECK_NAMES
from tests.labs.probe.chains import chain, urls

USER_TEST = "def test_mine():\n    pass\n"


def url_args(hops) -> list[str]:
    return [f"--stream-url={url}" for url in urls(hops)]


def test_nothing_is_collected_without_options(pytester):
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*test_stream_*")


def test_every_check_is_a_test_with_a_readable_id(pytester):
    pytester.makepyfile(USER_TEST)
    # Nothing listens on port 1: collecting must not probe anything.
    result = pytester.runpytest_subprocess("--stream-url=http://127.0.0.1:1/v1", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"streamlab::test_stream_path[[]{name}[]]" for name in CHECK_NAMES])


def test_a_faulty_hop_fails_its_check_with_the_evidence_and_the_fix(pytester, origin):
    pytester.makepyfile(USER_TEST)
    with chain([("envoy", "fixed", {}), ("nginx", "nginx-buffering:broken", {})], origin.port) as hops:
        result = pytester.runpytest_subprocess(*url_args(hops), "-v", "-k", "buffering or coalescing or mine")
    result.assert_outcomes(passed=2, failed=1, deselected=len(CHECK_NAMES) - 2)
    result.stdout.fnmatch_lines([
        "*test_stream_path[[]buffering[]] FAILED*",
        "*test_stream_path[[]coalescing[]] PASSED*",
        f"buffering at hop 1 ({urls(hops)[1]}): *TTFT *",
        "fix: nginx-buffering: proxy_buffering off;*",
        "see: make lab-nginx-buffering",
    ])


def test_a_clean_path_passes_the_selected_checks(pytester, origin):
    pytester.makepyfile(USER_TEST)
    with chain([("haproxy", "fixed", {}), ("nginx", "fixed", {})], origin.port) as hops:
        result = pytester.runpytest_subprocess(*url_args(hops), "-k", "disconnect or connection-limit")
    result.assert_outcomes(passed=2, deselected=len(CHECK_NAMES) - 2 + 1)


def test_an_unusable_path_fails_the_selected_tests_with_the_reason(pytester):
    result = pytester.runpytest_subprocess("--stream-url=http://127.0.0.1:1/v1", "-k", "buffering")
    result.assert_outcomes(failed=1, deselected=len(CHECK_NAMES) - 1)
    result.stdout.fnmatch_lines(
        ["*the path cannot be probed: cannot list the models at http://127.0.0.1:1/v1/models*"])


# A stand-in for the verify package, answering per file name, installed before any test runs.
FAKE_VERIFY = """
import contextlib, sys, types
from pathlib import Path
from labs.findings import CheckOutcome, Finding, PathReport, UnusableInput

CALLS = Path(__file__).with_name("verify-calls.txt")
CHECK_KINDS = {"streaming": ("buffering",), "silence-mid-stream": ("idle-timeout",),
               "disconnect": ("disconnect-not-propagated",)}

def note(line):
    with CALLS.open("a") as calls:
        calls.write(line + "\\n")

@contextlib.contextmanager
def lab_server():
    note("lab server started")
    yield "the-shared-lab-server"
    note("lab server stopped")

def verify_config(path, *, proxy=None, checks=None, server=None, **options):
    note(f"{Path(path).name} {proxy} {','.join(checks)} {server}")
    if path.name == "unusable.conf":
        raise UnusableInput('unknown directive "proxy_bufering"', file=str(path), line=3)
    report = PathReport()
    report.checks = [CheckOutcome("streaming", path.name != "broken.conf", "TTFT 2.0 s", kind="buffering"),
                     CheckOutcome("mid-stream silence", True, "a 30 s silence passed", kind="idle-timeout")]
    if path.name == "broken.conf":
        report.findings = [
            Finding("buffering", "failure", "TTFT 2.0 s, E2E 2.0 s: one lump", where="broken.conf:12",
                    scenario="nginx-buffering", fix="proxy_buffering off;"),
            Finding("idle-timeout", "warning", "proxy_read_timeout 20s", where="broken.conf:14",
                    reason="the 30 s silence passed: heartbeats reset it")]
    return report

module = types.ModuleType("labs.verify")
module.verify_config = verify_config
module.lab_server = lab_server
module.CHECK_KINDS = CHECK_KINDS
sys.modules["labs.verify"] = module
"""


@pytest.fixture()
def fake_verify(pytester) -> Path:
    pytester.makeconftest(FAKE_VERIFY)
    return pytester.path / "verify-calls.txt"


def test_config_checks_fail_with_the_directive_and_the_fix(pytester, fake_verify):
    for name in ("broken.conf", "clean.conf", "unusable.conf"):
        pytester.makefile(".conf", **{name[:-len(".conf")]: "events {}\n"})
    args = [f"--stream-config={name}" for name in ("broken.conf", "clean.conf", "unusable.conf")]
    result = pytester.runpytest_subprocess(*args, "--stream-proxy=nginx", "-v",
                                           "-k", "buffering or idle-timeout")
    result.assert_outcomes(passed=3, failed=3, skipped=0, warnings=1, deselected=3 * 7 - 6)
    result.stdout.fnmatch_lines([
        "*test_stream_config[[]broken.conf-buffering[]] FAILED*",
        "*test_stream_config[[]broken.conf-idle-timeout[]] PASSED*",
        "*test_stream_config[[]clean.conf-buffering[]] PASSED*",
        "broken.conf: buffering (broken.conf:12): TTFT 2.0 s, E2E 2.0 s: one lump",
        "fix: proxy_buffering off;",
        "*unusable.conf cannot be verified: unusable.conf:3: unknown directive*",
    ])
    # One verify per file, whatever the number of its tests, with the plugin's options, running
    # only the checks that can show the selected kinds, all in front of one lab server (started
    # once for the session, stopped when pytest ends).
    assert fake_verify.read_text().split("\n")[:-1] == [
        "lab server started",
        "broken.conf nginx streaming,silence-mid-stream the-shared-lab-server",
        "clean.conf nginx streaming,silence-mid-stream the-shared-lab-server",
        "unusable.conf nginx streaming,silence-mid-stream the-shared-lab-server",
        "lab server stopped"]


def test_a_kind_that_verify_did_not_check_is_skipped(pytester, fake_verify):
    pytester.makefile(".conf", clean="events {}\n")
    result = pytester.runpytest_subprocess("--stream-config=clean.conf", "-k", "coalescing", "-rs")
    result.assert_outcomes(skipped=1, deselected=6)
    result.stdout.fnmatch_lines(["*verify ran no check for coalescing on clean.conf*"])
