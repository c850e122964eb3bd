"""The generated tables (the README's scenarios, docs/server.md's knobs) must not drift."""
from __future__ import annotations

import re
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


REPO = README.parent
DOCS = ("contract.md", "environment.md", "metrics.md")
CITED = re.compile(r"(?<![\w.-])((?:docs/)?(?:contract|environment|scenarios|metrics|style)\.md)\b")
SOURCES = (".py", ".j2", ".sh", ".md", ".yaml", ".Dockerfile")
# Citations in files another change is rewriting (the lab options' declaration); to be pointed
# at docs/ there.
NOT_YET: set[tuple[str, str]] = set()


def test_the_documents_the_code_cites_are_in_the_repository() -> None:
    """A comment that gives its reason in a document points to one in docs/, which exists."""
    stray = []
    for folder in ("server", "proxies", "labs", "tests", "docker"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix not in SOURCES or path == Path(__file__).resolve():
                continue
            where = str(path.relative_to(REPO))
            for name in CITED.findall(path.read_text(errors="replace")):
                if (where, name) not in NOT_YET and not (name.startswith("docs/") and (REPO / name).exists()):
                    stray.append(f"{where}: {name}")
    assert not stray, f"cited, but not a file in docs/: {stray}"


def test_the_readme_links_every_document_and_their_links_resolve() -> None:
    readme = README.read_text()
    for name in DOCS:
        assert f"(docs/{name})" in readme, name
        text = (REPO / "docs" / name).read_text()
        for target in re.findall(r"\]\(([^)#:]+)\)", text):
            assert (REPO / "docs" / target).resolve().exists(), f"docs/{name} links {target}"


def test_the_knob_table_matches_the_declarations() -> None:
    assert knobs.DOC == REPO / "docs" / "server.md"
    text = knobs.DOC.read_text(encoding="utf-8")
    assert knobs.BEGIN in text and knobs.END in text, "docs/server.md lacks the knob-table markers"
    assert text[text.index(knobs.BEGIN):text.index(knobs.END) + len(knobs.END)] == knobs.doc_table(), (
        "docs/server.md's knob table is stale: regenerate it with `python -m server.knobs --write`")
