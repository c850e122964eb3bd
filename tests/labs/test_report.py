"""The lab's output: terminal tables, report.json/.md, pictures, and the command line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from labs import catalogue
from labs.report import print_outcome, write_index, write_report
from labs.runner import ScenarioOutcome
from labs.scenario import Run

from tests.labs.test_checks import LUMP, PACED

REPO = Path(__file__).resolve().parents[2]


def outcome() -> ScenarioOutcome:
    """nginx-buffering as the lab would measure it, from hand-made streams (no processes)."""
    scenario = catalogue.get("nginx-buffering")
    result = ScenarioOutcome(scenario)
    for name, stream in (("broken", LUMP), ("fixed", PACED)):
        run = Run(variant=name, workload=scenario.workload, results=[stream],
                  configs={"nginx:1234": f"proxy_buffering {'on' if name == 'broken' else 'off'};\n"},
                  evidence=["nginx:1234 access: status=200 [not markup]"])
        result.runs[name] = run
        result.checks[name] = [check(run) for check in scenario.checks(name)]
    return result


def test_the_report_files_hold_every_measurement(tmp_path: Path) -> None:
    paths = write_report(outcome(), tmp_path / "nginx-buffering")
    report = json.loads(paths["json"].read_text())
    assert report["verdict"] == {"broken": "symptom reproduced", "fixed": "cured"}
    assert len(report["variants"]["broken"]["streams"][0]["events"]) == 20
    markdown = paths["md"].read_text()
    assert "| TTFT |" in markdown and "-proxy_buffering on;" in markdown and "+proxy_buffering off;" in markdown
    assert paths["png"].stat().st_size > 10_000
    index = write_index([outcome()], tmp_path).read_text()
    assert "[nginx-buffering](nginx-buffering/report.md)" in index


def test_the_terminal_shows_the_table_the_checks_the_diff_and_the_evidence() -> None:
    console = Console(record=True, width=140)
    print_outcome(outcome(), console)
    text = console.export_text()
    for expected in ("symptom reproduced", "cured", "TTFT", "what the fix changes", "Sources:",
                     "[not markup]"):  # proxy log text is shown as it is, never read as markup
        assert expected in text


def test_an_unknown_scenario_is_a_clear_error() -> None:
    done = subprocess.run([sys.executable, "-m", "labs", "run", "nginx-bufering"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no scenario named 'nginx-bufering'" in done.stderr and "python -m labs list" in done.stderr


def test_a_lab_runs_from_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "labs", "run", "haproxy-compression", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "symptom reproduced" in done.stdout and "cured" in done.stdout
    assert {p.name for p in (tmp_path / "haproxy-compression").iterdir()} >= {"report.json", "report.md",
                                                                             "timeline.png"}
