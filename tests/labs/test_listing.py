"""`python -m labs list`: every scenario name whole, piped, as JSON and in a terminal of any width."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from labs import catalogue
from labs.scenario.listing import print_list

REPO = Path(__file__).resolve().parents[2]
NAMES = [s.name for s in catalogue.ALL] + ["load"]


def _labs_list(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "labs", "list", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "80", **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_piped_at_80_columns_every_name_is_whole() -> None:
    lines = _labs_list().splitlines()
    assert [line.split()[0] for line in lines] == NAMES  # one scenario per line, name first
    assert not any("…" in line for line in lines)
    symptoms = {s.name: s.symptom for s in catalogue.ALL}
    for line in lines[:-1]:
        assert line.endswith(symptoms[line.split()[0]])  # nothing cut at the end either


def test_json_lists_every_scenario() -> None:
    listed = json.loads(_labs_list("--json"))
    assert [row["name"] for row in listed] == NAMES
    first = listed[0]
    assert {k: v for k, v in first.items() if k != "also_on"} == {
        "name": "nginx-buffering", "layer": "proxy", "path": "nginx 1.30 -> server",
        "symptom": catalogue.get("nginx-buffering").symptom, "command": "make lab-nginx-buffering",
        "releases": {"nginx": "1.30 (Debian sid)"}}
    assert listed[-1]["path"] == "client -> each proxy -> server"  # the load lab: no one release


def test_the_list_names_the_release_the_choice_runs() -> None:
    listed = json.loads(_labs_list("--json", env={"LAB_PROXY_VERSION": "oldest"}))
    assert listed[0]["path"] == "nginx 1.22 -> server" and listed[0]["releases"] == {"nginx": "1.22 (Debian 12)"}


def test_an_mcp_scenario_is_listed_with_its_proxies_and_their_releases() -> None:
    """MCP scenarios are entries of the one table: listed as the others, each proxy with its release."""
    listed = {row["name"]: row for row in json.loads(_labs_list("--json", env={"LAB_PROXY_VERSION": "oldest"}))}
    row = listed["mcp-session-affinity"]
    assert row["path"] == "nginx 1.22 or haproxy 2.6 -> 2 MCP replicas"
    assert row["releases"] == {"nginx": "1.22 (Debian 12)", "haproxy": "2.6 (Debian 12)"}
    assert row["command"] == "make lab-mcp-session-affinity"


@pytest.mark.parametrize("width", [30, 60, 80, 100, 200])
def test_a_terminal_of_any_width_shows_every_name_whole(width: int) -> None:
    console = Console(width=width, record=True, force_terminal=True, color_system=None)
    print_list(catalogue.ALL, console=console)
    text = console.export_text()
    cells = {cell.strip() for line in text.splitlines() for cell in line.replace("│", "\n").splitlines()}
    words = {line.split()[0] for line in text.splitlines() if line.strip() and line.split()[0] != "│"}
    for name in NAMES:
        assert name in cells or name in words, f"{name} cut at width {width}:\n{text}"
    assert "…" not in text
