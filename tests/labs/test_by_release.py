"""A scenario whose lesson changed between releases (Scenario.since): `labs run` measures it on the
current release and then on each older one, and the report shows a table by release."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from labs import catalogue
from labs.scenario.model import Run, Variant
from labs.scenario.report import print_outcome, report_dict, write_report
from labs.scenario.releases import older_releases, own_defaults
from labs.scenario.runner import Lab, ScenarioOutcome
from proxies.kinds import KINDS
from proxies.releases import CHOICE_VARIABLE

from tests.labs.test_checks import LUMP, PACED

REPO = Path(__file__).resolve().parents[2]
BUFFERING = catalogue.get("nginx-buffering")
CURRENT, OLDEST = KINDS["nginx"].current.series, KINDS["nginx"].releases[0].series


def test_nginx_buffering_declares_the_release_that_changed_its_lesson() -> None:
    assert [(s.proxy, s.version) for s in BUFFERING.since] == [("nginx", "1.29.7")]
    assert own_defaults(BUFFERING) == Variant(proxy={"nginx": {"proxy_http_version": None}})
    assert own_defaults(catalogue.get("nginx-gzip")) is None
    assert older_releases(BUFFERING) == [f"nginx={OLDEST}"]
    assert older_releases(catalogue.get("nginx-gzip")) == []  # measured alike on both


def _recorded(monkeypatch: pytest.MonkeyPatch, lab: Lab) -> list[str | None]:
    """The release choices Lab.run measures on, each as an empty outcome (no processes)."""
    choices: list[str | None] = []

    def run_on(scenario: Any, variants: Any, choice: str | None) -> ScenarioOutcome:
        choices.append(choice)
        return ScenarioOutcome(scenario, releases=lab.releases(scenario.path, choice))
    monkeypatch.setattr(lab, "_run_on", run_on)
    return choices


# Ids without a scenario's name: `pytest -k nginx-buffering` selects its guards only (test_selection).
@pytest.mark.parametrize(("chosen", "by_release", "scenario", "expected"), [
    pytest.param(None, True, "nginx-buffering", [None, f"nginx={OLDEST}"], id="by-default-every-release"),
    pytest.param(None, False, "nginx-buffering", [None], id="run-all-and-guards-the-lab-choice"),
    pytest.param(OLDEST, True, "nginx-buffering", [OLDEST], id="a-chosen-release-alone"),
    pytest.param("current", True, "nginx-buffering", ["current"], id="current-named-alone"),
    pytest.param(None, True, "nginx-gzip", [None], id="no-since-one-release"),
])
def test_lab_run_adds_the_older_releases_only_when_none_was_chosen(
        monkeypatch: pytest.MonkeyPatch, chosen: str | None, by_release: bool, scenario: str,
        expected: list[str | None]) -> None:
    monkeypatch.delenv(CHOICE_VARIABLE, raising=False)
    lab = Lab(runtime="local", proxy_version=chosen)
    choices = _recorded(monkeypatch, lab)
    outcome = lab.run(catalogue.get(scenario), by_release=by_release)
    assert choices == expected
    assert [each.releases.get("nginx") for each in outcome.every_release] == [
        OLDEST if choice in (OLDEST, f"nginx={OLDEST}") else CURRENT for choice in expected]


def test_the_environment_choice_counts_as_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHOICE_VARIABLE, OLDEST)
    lab = Lab(runtime="local")
    choices = _recorded(monkeypatch, lab)
    lab.run(BUFFERING, by_release=True)
    assert choices == [OLDEST]


def _measured(series: str, version: str, source: str, broken=LUMP) -> ScenarioOutcome:  # type: ignore[no-untyped-def]
    """nginx-buffering on one release, from hand-made streams."""
    outcome = ScenarioOutcome(BUFFERING, releases={"nginx": series}, provenance={
        "started_at": "2026-12-06T16:20:05+00:00", "runtime": "local",
        "proxies": {"nginx": {"binary": "nginx", "version": version, "source": source}},
        "server_commands": {"broken": "python -m server --http h11"}, "git": {"commit": "ab" * 20},
        "cpus": 2, "python": "3.11.7"})
    for name, stream in (("broken", broken), ("fixed", PACED)):
        run = Run(variant=name, workload=BUFFERING.workload, results=[stream])
        outcome.runs[name] = run
        outcome.checks[name] = [check(run) for check in BUFFERING.checks(name)]
    return outcome


def test_the_report_shows_each_release_its_verdicts_and_provenance(tmp_path: Path) -> None:
    outcome = _measured(CURRENT, "1.30.6", "Debian sid")
    outcome.older = [_measured(OLDEST, "1.22.1", "Debian 12")]
    paths = write_report(outcome, tmp_path)
    markdown = paths["md"].read_text()
    assert "## By release" in markdown
    for row in ("| nginx 1.30.6 (Debian sid) | broken | symptom reproduced | 2,000 ms | 1 |",
                "| nginx 1.30.6 (Debian sid) | fixed | cured | 10 ms | 20 |",
                "| nginx 1.22.1 (Debian 12) | broken | symptom reproduced | 2,000 ms | 1 |",
                "| nginx 1.22.1 (Debian 12) | fixed | cured | 10 ms | 20 |",
                "- made on 2026-12-06 16:20:05 UTC · runtime local · nginx 1.22.1 (Debian 12) ·"):
        assert row in markdown
    by_release = json.loads(paths["json"].read_text())["by_release"]
    assert [(entry["release"], entry["verdict"]["broken"]) for entry in by_release] == [
        ("nginx 1.30.6 (Debian sid)", "symptom reproduced"), ("nginx 1.22.1 (Debian 12)", "symptom reproduced")]
    assert by_release[1]["variants"]["fixed"]["reads"] == 20 and by_release[1]["releases"] == {"nginx": OLDEST}
    console = Console(record=True, width=160)
    print_outcome(outcome, console)
    text = console.export_text()
    assert "by release" in text and "runtime local · nginx 1.22.1 (Debian 12)" in text
    assert outcome.all_passed


def test_a_release_that_behaves_otherwise_shows_in_its_row_and_fails_the_run() -> None:
    outcome = _measured(CURRENT, "1.30.6", "Debian sid", broken=PACED)  # 1.30's defaults stream
    outcome.older = [_measured(OLDEST, "1.22.1", "Debian 12")]
    rows = report_dict(outcome)["by_release"]
    assert rows[0]["verdict"]["broken"] == "symptom did NOT reproduce"
    assert rows[1]["verdict"]["broken"] == "symptom reproduced"
    assert not outcome.all_passed and outcome.passed("fixed")


def test_one_release_has_no_table(tmp_path: Path) -> None:
    outcome = _measured(OLDEST, "1.22.1", "Debian 12")
    paths = write_report(outcome, tmp_path)
    assert "By release" not in paths["md"].read_text()
    assert json.loads(paths["json"].read_text())["by_release"] == []
    console = Console(record=True, width=160)
    print_outcome(outcome, console)
    assert "by release" not in console.export_text()


@pytest.mark.slow
def test_labs_run_measures_both_releases_and_a_chosen_one_alone(tmp_path: Path) -> None:
    def run(*extra: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-m", "labs", "run", "nginx-buffering", "--out", str(tmp_path),
                               *extra], cwd=REPO, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return json.loads((tmp_path / "nginx-buffering" / "report.json").read_text())
    both = run()
    assert both["provenance"]["proxies"]["nginx"]["version"].startswith(CURRENT + ".")
    assert [entry["provenance"]["proxies"]["nginx"]["version"].rsplit(".", 1)[0]
            for entry in both["by_release"]] == [CURRENT, OLDEST]
    assert all(variant["passed"] for entry in both["by_release"] for variant in entry["variants"].values())
    # Left at its own defaults (no pinned HTTP/1.0), 1.30 streams and 1.22 holds the stream: the
    # lesson that changed, measured each time, with the config that ran (no proxy_http_version).
    own = {entry["release"].split()[1].rsplit(".", 1)[0]: entry["own_defaults"] for entry in both["by_release"]}
    assert own[CURRENT]["verdict"] == "no symptom" and own[OLDEST]["verdict"] == "symptom reproduced", own
    assert own[CURRENT]["reads"] > own[OLDEST]["reads"] and own[CURRENT]["ttft_s"] < own[OLDEST]["ttft_s"]
    assert all("proxy_http_version" not in "".join(o["configs"].values()) for o in own.values())
    assert "proxy_http_version        1.0" in "".join(both["variants"]["broken"]["configs"].values())
    chosen = run("--proxy-version", OLDEST)
    assert chosen["by_release"] == [] and chosen["releases"] == {"nginx": OLDEST}
    assert chosen["provenance"]["proxies"]["nginx"]["version"].startswith(OLDEST + ".")
