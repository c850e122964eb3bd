"""`make lab-all`: the progress bar, one line per scenario, the one-screen summary, the index."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from labs import catalogue
from labs.scenario import runner
from labs.scenario.run_all import MCP_RUN_S, SummaryRow, planned_s, run_all, summary_table
from tests.ids import other_id
from tests.labs.test_report import outcome


def _render(renderable, width: int = 80) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_summary_fits_one_screen_and_names_every_verdict() -> None:
    rows = [SummaryRow(s.name, True, True, 4.2) for s in catalogue.SCENARIOS]
    rows[1] = SummaryRow(rows[1].name, False, True, 3.0)
    rows[2] = SummaryRow(rows[2].name, True, False, 61.0)
    rows[3] = SummaryRow(rows[3].name, wall_s=0.5, error="ProcessFailed: nginx exited with status 1")
    text = _render(summary_table(rows, total_s=125.0))
    lines = text.splitlines()
    assert len(lines) <= len(rows) + 8  # title, header, rules, caption: one screen for 30 scenarios
    assert max(len(line) for line in lines) <= 80
    for row in rows:
        assert any(line.startswith(f"│ {row.name} ") for line in lines), row.name
    assert f"│ {rows[1].name} " in text and "NOT reproduced" in text and "NOT cured" in text
    assert f"│ {rows[3].name} " in text and "could not run" in text and "1:01" in text
    n = len(rows)
    assert f"{n - 2}/{n} reproduced, {n - 2}/{n} cured, 1 could not run; 2:05 in all" in text


def test_a_symptom_gone_on_a_release_that_fixed_it_is_a_pass_and_its_return_a_failure() -> None:
    gone = SummaryRow("haproxy-compression", False, True, 2.0, gone=True)
    back = SummaryRow("caddy-encode", True, True, 2.0, gone=True)
    missing = SummaryRow("haproxy-nodelay", False, True, 2.0)
    assert gone.ok and not back.ok and not missing.ok
    text = _render(summary_table([gone, back, missing], total_s=6.0))
    assert "gone here" in text and "reproduced (unexpected)" in text and "NOT reproduced" in text
    assert "1/3 reproduced (1 gone on a release that fixed them), 3/3 cured" in text


@pytest.mark.parametrize(("name", "releases", "gone"), [
    ("haproxy-compression", {"haproxy": "3.2"}, True),
    ("haproxy-compression", {"haproxy": "2.6"}, False),
    ("chain-edge-compression", {"varnish": "7.7", "caddy": "2.11", "nginx": "1.30"}, True),
    ("chain-edge-compression", {"varnish": "7.7", "caddy": "2.6", "nginx": "1.30"}, False),
    ("nginx-accel-header", {"nginx": "1.30"}, False),  # a default changed, not a fix
    ("haproxy-compression", {}, False)], ids=lambda value: other_id(value) if isinstance(value, str) else None)
def test_the_releases_a_run_used_say_whether_its_symptom_is_gone(name: str, releases: dict, gone: bool) -> None:
    assert catalogue.get(name).symptom_ended(releases) is gone


def test_the_plan_uses_the_last_wall_time_else_the_workload(tmp_path: Path) -> None:
    scenario = catalogue.get("nginx-buffering")
    guess = planned_s(scenario, tmp_path)
    words = len(scenario.workload.script.split())
    assert guess == pytest.approx(2 * (words / scenario.workload.tokens_per_s) + 2.0)
    (tmp_path / scenario.name).mkdir()
    (tmp_path / scenario.name / "report.json").write_text(json.dumps(
        {"variants": {"broken": {"wall_s": 3.5}, "fixed": {"wall_s": 2.5}}}))
    assert planned_s(scenario, tmp_path) == pytest.approx(8.0)


class _FakeLab:
    """Stands in for runner.Lab: hand-made nginx-buffering outcomes, one scenario that fails."""

    def __init__(self, runtime=None, progress=None, **_):
        self.progress = progress

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def run(self, scenario, variants=("broken", "fixed")):
        self.progress(f"{scenario.name}: broken variant")
        if scenario.name == "nginx-gzip":
            raise RuntimeError("nginx would not start\nsecond line")
        made = outcome()
        made.provenance = {"runtime": "local", "started_at": "2026-01-01T00:00:00+00:00"}
        return made


def test_run_all_shows_progress_each_scenario_and_the_summary(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "Lab", _FakeLab)
    scenarios = [catalogue.get(n) for n in ("nginx-buffering", "nginx-gzip", "haproxy-nodelay")]
    console = Console(record=True, width=100, color_system=None, force_terminal=True)
    status = run_all(scenarios, None, tmp_path, console)
    text = console.export_text()
    assert status == 1  # one scenario could not run
    assert "lab-all" in text and "left" in text  # the bar, with its time left
    assert "✓ nginx-buffering: symptom reproduced / cured" in text
    assert "✗ nginx-gzip: could not run: RuntimeError: nginx would not start" in text
    assert "2/3 reproduced, 2/3 cured, 1 could not run" in text
    index = (tmp_path / "index.md").read_text()
    assert "| nginx-gzip | could not run: RuntimeError: nginx would not start |" in index
    assert "(nginx-buffering/report.md)" in index and "runtime local" in index


class _DockerLab(_FakeLab):
    runtime = type("Runtime", (), {"name": "docker"})()


def test_run_all_in_docker_skips_an_mcp_scenario_without_its_image_in_one_line_and_runs_the_others(
        tmp_path: Path, monkeypatch) -> None:
    from proxies.runtime import docker_mcp
    monkeypatch.setattr(runner, "Lab", _DockerLab)
    missing = "mcp: streamlab/mcp:host is not built; run `make images-offline`"
    monkeypatch.setattr(docker_mcp, "image_problem", lambda: missing)
    scenarios = [catalogue.get("nginx-buffering"), catalogue.find("mcp-session-affinity")]
    console = Console(record=True, width=200, color_system=None, force_terminal=True)
    status = run_all(scenarios, "docker", tmp_path, console)
    text = console.export_text()
    assert status == 0 and "✓ nginx-buffering: symptom reproduced / cured" in text
    skipped = [line for line in text.splitlines() if "mcp-session-affinity: skipped" in line]
    assert len(skipped) == 1 and "streamlab/mcp:host is not built" in skipped[0]
    assert "skipped in the docker runtime: mcp-session-affinity" in text
    assert not (tmp_path / "mcp-session-affinity").exists()


def test_an_mcp_scenario_runs_in_docker_where_its_image_is(monkeypatch) -> None:
    """With the mcp image built (make docker-ready), nothing stops lab-all in docker from running it."""
    from labs.scenario import play
    from proxies.runtime import docker_mcp
    monkeypatch.setattr(docker_mcp, "image_problem", lambda: None)
    assert play.cannot_run(catalogue.find("mcp-session-affinity"), _DockerLab) is None


def test_the_plan_of_an_mcp_scenario_counts_its_runs(tmp_path: Path) -> None:
    scenario = catalogue.find("mcp-session-affinity")
    assert planned_s(scenario, tmp_path) == pytest.approx(MCP_RUN_S * len(scenario.runs()) + 2.0)
