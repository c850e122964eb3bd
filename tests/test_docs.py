"""The README's generated sections (the scenario table, the knob table) must not drift."""
from __future__ import annotations

from pathlib import Path

from labs.docs import BEGIN, END, scenario_table
from server import knobs

README = Path(__file__).resolve().parent.parent / "README.md"


def _section(begin: str, end: str) -> str:
    text = README.read_text()
    assert begin in text and end in text, f"README.md lacks the markers {begin!r} ... {end!r}"
    return text[text.index(begin):text.index(end) + len(end)]


def test_readme_scenario_table_matches_the_catalogue() -> None:
    assert _section(BEGIN, END) == scenario_table(), (
        "README.md's scenario table is stale: regenerate it with `python -m labs readme-table`")


def test_readme_knob_table_matches_the_declarations() -> None:
    assert _section(knobs.BEGIN, knobs.END) == knobs.readme_table(), (
        "README.md's knob table is stale: regenerate it with `python -m server.knobs --write README.md`")
