"""The README's scenario table is generated from the catalogue; it must not drift."""
from __future__ import annotations

from pathlib import Path

from labs.docs import BEGIN, END, scenario_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_scenario_table_matches_the_catalogue() -> None:
    text = README.read_text()
    assert BEGIN in text and END in text, "README.md lacks the generated scenario table markers"
    current = text[text.index(BEGIN):text.index(END) + len(END)]
    assert current == scenario_table(), (
        "README.md's scenario table is stale: regenerate it with `python -m labs readme-table`")
