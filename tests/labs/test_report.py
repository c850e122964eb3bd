"""The lab's output: terminal tables, report.json/.md, pictures, and the command line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from labs import catalogue, provenance
from labs.scenario.report import print_outcome, write_index, write_report
from labs.scenario.runner import ScenarioOutcome
from labs.scenario.model import Run

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
    # A proxy with one release (Traefik): what this proves is the command, not a release's lesson.
    done = subprocess.run([sys.executable, "-m", "labs", "run", "traefik-buffering", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "symptom reproduced" in done.stdout and "cured" in done.stdout
    assert {p.name for p in (tmp_path / "traefik-buffering").iterdir()} >= {"report.json", "report.md",
                                                                           "timeline.png"}


def test_report_json_records_its_provenance_and_report_md_shows_it_in_one_line(tmp_path: Path) -> None:
    made = outcome()
    made.provenance = provenance.collect("local", ("nginx",), {"broken": "python -m server --http h11",
                                                               "fixed": "python -m server --http h11"})
    paths = write_report(made, tmp_path / "nginx-buffering")
    recorded = json.loads(paths["json"].read_text())["provenance"]
    assert {"started_at", "runtime", "proxies", "server_commands", "git", "cpus", "python"} <= set(recorded)
    assert recorded["runtime"] == "local"
    assert recorded["proxies"]["nginx"]["version"].count(".") == 2  # read from `nginx -v`
    assert recorded["server_commands"]["broken"] == "python -m server --http h11"
    assert len(recorded["git"]["commit"]) == 40 and isinstance(recorded["git"]["dirty"], bool)
    assert recorded["cpus"] >= 1 and recorded["python"].startswith("3.")
    lines = [line for line in paths["md"].read_text().splitlines() if line.startswith("**Provenance:**")]
    assert len(lines) == 1
    line = lines[0]
    for shown in ("runtime local", f"nginx {recorded['proxies']['nginx']['version']}",
                  "server `python -m server --http h11`", recorded["git"]["commit"][:12],
                  f"{recorded['cpus']} CPUs", f"Python {recorded['python']}"):
        assert shown in line


def test_docker_provenance_names_the_images() -> None:
    info = {"started_at": "2026-01-02T03:04:05+00:00", "runtime": "docker",
            "proxies": {"nginx": {"image": "nginx:1.22.1", "image_id": "sha256:" + "ab" * 32,
                                  "chosen_by": "official"},
                        "caddy": {"image": "caddy:2.11", "image_id": None, "chosen_by": "official",
                                  "release": "2.11"},
                        "haproxy": {"image": "streamlab/haproxy:3.2", "image_id": None, "chosen_by": "offline",
                                    "release": "3.2", "version": "3.2.26", "source": "Debian sid"}},
            "server_image": {"image": "streamlab/server:host", "image_id": None, "chosen_by": "offline"},
            "server_commands": {"broken": "python -m server --a", "fixed": "python -m server --b"},
            "git": {"commit": "0123456789abcdef" * 2 + "01234567", "dirty": False},
            "cpus": 16, "cpus_usable": 2, "python": "3.11.2"}
    line = provenance.one_line(info)
    assert line.startswith("made on 2026-01-02 03:04:05 UTC · runtime docker")
    assert "nginx image `nginx:1.22.1` (abababababab)" in line and "server image `streamlab/server:host`" in line
    # The release each image carries: its series, and a stand-in's exact version and source.
    assert "caddy 2.11 image `caddy:2.11`" in line
    assert "haproxy 3.2.26 (Debian sid) image `streamlab/haproxy:3.2`" in line
    assert "broken server `python -m server --a`" in line and "fixed server `python -m server --b`" in line
    assert "commit 0123456789ab ·" in line and "16 CPUs (2 usable)" in line


def test_provenance_outside_a_git_checkout_says_so(tmp_path: Path) -> None:
    state = provenance.git_state(tmp_path)
    assert state["commit"] is None and "not a git checkout" in state["error"]
