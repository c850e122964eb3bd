"""`labs probe --format sarif|github`: findings about a URL, not a file (a SARIF logical location,
an annotation of the run), from reports built here and from a URL the probe cannot use."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from labs.findings import CheckOutcome, Finding
from labs.findings import ci
from labs.probe.report import ProbeReport
from tests.sarif import valid_sarif

REPO = Path(__file__).resolve().parents[3]
OUTER, INNER = "http://gateway.test/v1", "http://proxy.test:8080/v1"


def a_report() -> ProbeReport:
    return ProbeReport(urls=[OUTER, INNER], findings=[
        Finding("buffering", "failure", "TTFT 2.4 s near E2E 2.5 s", hop=1, fix="proxy_buffering off;"),
        Finding("idle-timeout", "warning", "cut after a 10 s silence", reason="the canary is not there"),
    ], checks=[CheckOutcome("buffering", False, "held", kind="buffering"),
               CheckOutcome("total-timeout", False, "", kind="total-timeout", skipped="out of budget")])


def sarif(report: ProbeReport) -> dict:
    log = ci.sarif_log(report, tool="streamlab probe", place=report.place, exit_code=report.exit_status)
    return valid_sarif(json.dumps(log))


def test_the_sarif_log_places_each_finding_at_its_hops_url() -> None:
    run = sarif(a_report())["runs"][0]
    inner, unknown = run["results"]
    assert inner["locations"] == [{"logicalLocations": [{"fullyQualifiedName": INNER, "kind": "resource"}]}]
    assert f"At hop 1 ({INNER})" in inner["message"]["text"]
    assert unknown["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == OUTER
    assert "could not tell" in unknown["message"]["text"] and unknown["level"] == "warning"
    assert run["invocations"][0]["toolExecutionNotifications"][0]["associatedRule"]["id"] == "total-timeout"


def test_github_annotations_name_the_url_in_the_message() -> None:
    lines = ci.workflow_commands(a_report(), tool="streamlab probe", place=a_report().place)
    assert lines[0] == ("::error title=streamlab probe%3A buffering::TTFT 2.4 s near E2E 2.5 s%0A"
                        f"At hop 1 ({INNER}).%0AFix: proxy_buffering off;")
    assert lines[-1] == ("::notice title=streamlab probe::1 failure(s), 1 warning(s); "
                         "1 check(s) skipped (not measured)")


def test_the_command_on_an_unusable_url() -> None:
    done = subprocess.run([sys.executable, "-m", "labs", "probe", "gateway.test", "--format", "sarif"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    invocation = valid_sarif(done.stdout)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    assert "is not an http:// or https:// URL" in invocation["toolExecutionNotifications"][0]["message"]["text"]
    done = subprocess.run([sys.executable, "-m", "labs", "probe", "gateway.test", "--format", "github"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout.startswith("::error title=streamlab probe%3A unusable input::")
