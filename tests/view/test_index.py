"""The view's index without a browser (its app served in-process): the MCP scenarios are listed
apart, with why the view does not play them and the command that does."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from fastapi.testclient import TestClient

from labs import catalogue
from labs.view.app import create_app


def _client(tmp_path: Path) -> TestClient:
    return TestClient(create_app(SimpleNamespace(reports=tmp_path)))  # type: ignore[arg-type]


def test_the_index_says_the_mcp_scenarios_play_in_the_terminal_and_how(tmp_path: Path) -> None:
    page = _client(tmp_path).get("/").text
    assert catalogue.MCP_SCENARIOS
    for scenario in catalogue.MCP_SCENARIOS:
        assert f'data-terminal-scenario="{scenario.name}">make lab-{scenario.name}</code>' in page
        assert f'data-scenario="{scenario.name}"' not in page  # no page to play it on
    assert "terminal only" in page and "official MCP SDK" in page
    assert 'data-scenario="nginx-buffering"' in page  # the token streams are listed as before


def test_an_mcp_scenario_page_names_the_command_that_plays_it(tmp_path: Path) -> None:
    answer = _client(tmp_path).get("/scenario/mcp-session-affinity")
    assert answer.status_code == 404 and "python -m labs run mcp-session-affinity" in answer.text
