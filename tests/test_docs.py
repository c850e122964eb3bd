"""The documents: generated tables that must not drift, a front page that fits on a screen, and
links that lead somewhere."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from labs.catalogue.readme_table import BEGIN, END, scenario_table
from server import knobs

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
README_MAX_LINES = 250


def _section(path: Path, begin: str, end: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert begin in text and end in text, f"{path.name} lacks the markers {begin!r} ... {end!r}"
    return text[text.index(begin):text.index(end) + len(end)]


def test_readme_scenario_table_matches_the_catalogue() -> None:
    assert _section(README, BEGIN, END) == scenario_table(), (
        "README.md's scenario table is stale: regenerate it with `python -m labs readme-table --write`")


def test_the_knob_table_matches_the_declarations() -> None:
    assert knobs.DOC == REPO / "docs" / "server.md"
    assert _section(knobs.DOC, knobs.BEGIN, knobs.END) == knobs.doc_table(), (
        "docs/server.md's knob table is stale: regenerate it with `python -m server.knobs --write`")


def test_the_readme_fits_on_a_screen() -> None:
    """The front page says what the lab is and links the rest; tutorials and figures live in docs/."""
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines (under {README_MAX_LINES}): move the detail to a page in docs/")


CITED = re.compile(r"(?<![\w./-])((?:docs/)?(?:contract|environment|scenarios|metrics|style)\.md"
                   r"|docs/[\w-]+\.md)\b")
SOURCES = (".py", ".j2", ".sh", ".md", ".yaml", ".Dockerfile")
# Citations in files another change is rewriting (the lab options' declaration); to be pointed
# at docs/ there.
NOT_YET: set[tuple[str, str]] = set()


def test_the_documents_the_code_cites_are_in_the_repository() -> None:
    """A comment that gives its reason in a document points to one in docs/, which exists."""
    stray = []
    tracked = subprocess.run(["git", "ls-files", "server", "proxies", "labs", "tests", "docker"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    # The project's own files only: installed Node modules and built sites cite their own docs.
    for path in (REPO / name for name in tracked):
        if path.suffix not in SOURCES or path == Path(__file__).resolve() or not path.is_file():
            continue
        where = str(path.relative_to(REPO))
        for name in CITED.findall(path.read_text(errors="replace")):
            if (where, name) not in NOT_YET and not (name.startswith("docs/") and (REPO / name).exists()):
                stray.append(f"{where}: {name}")
    assert not stray, f"cited, but not a file in docs/: {stray}"


# A Markdown link `[text](target)` or `[text](target#anchor)`; code spans are removed first, so a
# link shown as code is not taken for one.
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered (-1, -2, ...)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _broken_links(page: Path) -> list[str]:
    """Every relative link on `page` that names no file, or a heading its file does not have."""
    broken = []
    for target in LINK.findall(CODE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target} (no such heading)")
    return broken


def test_the_readme_links_every_document_and_their_links_resolve() -> None:
    readme = README.read_text(encoding="utf-8")
    assert len(DOCS) > 3, "docs/ was not found"
    unlinked = [page.name for page in DOCS if f"(docs/{page.name})" not in readme]
    assert not unlinked, f"README.md links no page of: {unlinked}"
    broken = {str(page.relative_to(REPO)): links
              for page in (README, *DOCS) if (links := _broken_links(page))}
    assert not broken, f"links that lead nowhere: {broken}"


@pytest.mark.parametrize("heading, anchor", [
    ("## A lab, as you see it", "a-lab-as-you-see-it"),
    ("## The server's HTTP interface", "the-servers-http-interface"),
    ("## `proxies/fixed/`: the configs users copy", "proxiesfixed-the-configs-users-copy"),
    ("## The peers' definitions (AIPerf 0.13.0, guidellm 0.8.1)",
     "the-peers-definitions-aiperf-0130-guidellm-081"),
    ("## The load lab (`make lab-load`)", "the-load-lab-make-lab-load"),
])
def test_anchors_are_read_as_github_makes_them(heading: str, anchor: str) -> None:
    assert _anchors(heading) == {anchor}
