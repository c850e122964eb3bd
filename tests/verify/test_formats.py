"""`labs verify --format sarif|github`: a SARIF 2.1.0 log valid against the vendored schema, and
GitHub workflow commands escaped as GitHub documents, from reports built here (no proxy, no server)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from labs.findings import FINDING_KINDS, CheckOutcome, Finding, UnusableInput
from labs.findings.ci import escape_data, escape_property
from labs.verify import output
from labs.verify.model import VerifyReport
from tests.sarif import valid_sarif

REPO = Path(__file__).resolve().parents[2]


def a_report() -> VerifyReport:
    """A failure at a line, a warning whose directive is the proxy's default, a skipped check."""
    return VerifyReport(proxy="nginx", file="conf/nginx.conf", findings=[
        Finding("buffering", "failure", "streaming: 3.00 events per read", where="conf/conf.d/api.conf:38",
                scenario="nginx-buffering", fix="proxy_buffering off;"),
        Finding("idle-timeout", "warning", "proxy_read_timeout 60s (default)", where="default",
                scenario="nginx-read-timeout", fix="proxy_read_timeout 300s;", limit_s=60.0,
                reason="not measured: silence-mid-stream: the pause did not happen"),
    ], checks=[CheckOutcome("streaming", False, "3.00 events per read", kind="buffering"),
               CheckOutcome("silence-mid-stream", False, "", kind="idle-timeout",
                            skipped="the 20 s pause did not happen (longest gap 0.1 s)")])


def test_the_sarif_log_is_valid_and_places_each_finding() -> None:
    log = valid_sarif(output.for_ci(a_report(), "sarif"))
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "streamlab verify" and driver["version"]
    assert [rule["id"] for rule in driver["rules"]] == list(FINDING_KINDS)
    assert all("make lab-" in rule["help"]["text"] or "streamlab run" in rule["help"]["text"]
               for rule in driver["rules"])
    failure, warning = run["results"]
    assert (failure["ruleId"], failure["level"]) == ("buffering", "error")
    assert driver["rules"][failure["ruleIndex"]]["id"] == "buffering"
    at = failure["locations"][0]["physicalLocation"]
    assert at == {"artifactLocation": {"uri": "conf/conf.d/api.conf", "uriBaseId": "%SRCROOT%"},
                  "region": {"startLine": 38}}
    assert "proxy_buffering off;" in failure["message"]["text"]
    # The default: at the file verified, its first line, and the message says why.
    assert warning["level"] == "warning"
    assert warning["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "conf/nginx.conf"
    assert "The proxy's default applies" in warning["message"]["text"]
    assert "not measured" in warning["message"]["text"] and "(limit 60 s)" in warning["message"]["text"]
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is True and invocation["exitCode"] == 1
    [skipped] = invocation["toolExecutionNotifications"]
    assert skipped["level"] == "warning" and "silence-mid-stream" in skipped["message"]["text"]
    assert skipped["associatedRule"]["id"] == "idle-timeout"


def test_a_clean_report_is_a_valid_log_with_no_result() -> None:
    log = valid_sarif(output.for_ci(VerifyReport(proxy="haproxy", file="haproxy.cfg",
                                                 checks=[CheckOutcome("streaming", True, "ok")]), "sarif"))
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"][0]["exitCode"] == 0


def test_an_unusable_input_is_a_valid_log_with_an_error_notification() -> None:
    error = UnusableInput('unknown directive "proxy_bufering"', file="conf/nginx.conf", line=7)
    log = valid_sarif(output.error_for(error, "conf/nginx.conf", "sarif"))
    run = log["runs"][0]
    assert run["results"] == []
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    [notification] = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error" and "proxy_bufering" in notification["message"]["text"]
    assert notification["locations"][0]["physicalLocation"]["region"] == {"startLine": 7}


def test_github_annotations_of_a_report() -> None:
    lines = output.for_ci(a_report(), "github").splitlines()
    # Properties escape ":" and ","; the message keeps them (only %, CR and LF are escaped there).
    assert lines[0].startswith("::error file=conf/conf.d/api.conf,line=38,title=streamlab verify%3A buffering::"
                               "streaming: 3.00 events per read%0AFix: proxy_buffering off;")
    # The default has no line: the annotation is on the file.
    assert lines[1].startswith("::warning file=conf/nginx.conf,title=streamlab verify%3A idle-timeout::")
    assert lines[2].startswith("::warning title=streamlab verify%3A skipped::check silence-mid-stream")
    assert lines[3] == ("::notice title=streamlab verify::1 failure(s), 1 warning(s); "
                        "1 check(s) skipped (not measured)")
    assert len(lines) == 4


def test_github_escaping() -> None:
    text = "100% held,\r\nthen: cut"
    assert escape_data(text) == "100%25 held,%0D%0Athen: cut"
    assert escape_property(text) == "100%25 held%2C%0D%0Athen%3A cut"
    report = VerifyReport(proxy="nginx", file="a,b:c.conf", findings=[
        Finding("buffering", "failure", text, where="a,b:c.conf:3", fix="x")])
    first = output.for_ci(report, "github").splitlines()[0]
    assert first == ("::error file=a%2Cb%3Ac.conf,line=3,title=streamlab verify%3A buffering::"
                     "100%25 held,%0D%0Athen: cut%0AFix: x")


def verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labs", "verify", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_the_command_on_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    done = verify(str(missing), "--format", "sarif")
    assert done.returncode == 2, done.stderr
    notification = valid_sarif(done.stdout)["runs"][0]["invocations"][0]["toolExecutionNotifications"][0]
    assert "no such file" in notification["message"]["text"]
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == missing.as_uri()
    done = verify(str(missing), "--format", "github")
    assert done.returncode == 2, done.stderr
    assert done.stdout == (f"::error file={escape_property(str(missing))},"
                           f"title=streamlab verify%3A unusable input::{missing}: no such file\n")
    assert "no such file" in done.stderr  # and the reader of the log sees it too


@pytest.mark.parametrize("args", [("--json",), ("--format", "json")])
def test_json_and_format_json_are_the_same(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = verify(str(tmp_path / "nope.conf"), *args)
    assert done.returncode == 2 and json.loads(done.stdout)["ok"] is False


def test_json_with_another_format_is_refused(tmp_path: Path) -> None:
    done = verify(str(tmp_path / "nope.conf"), "--json", "--format", "sarif")
    assert done.returncode == 2 and "--json is --format json" in done.stderr and done.stdout == ""


def test_the_schema_check_refuses_what_sarif_does_not_allow() -> None:
    """The validation above is not vacuous: a level SARIF does not know is refused."""
    log = json.loads(output.for_ci(a_report(), "sarif"))
    log["runs"][0]["results"][0]["level"] = "failure"
    with pytest.raises(jsonschema.ValidationError):
        valid_sarif(json.dumps(log))
