"""The lists the documents write out, read against the tables they repeat: the proxy kinds, their
releases, files and images (proxies/kinds.py), the finding kinds (labs/findings/kinds.py),
verify's checks and proxies (labs/verify/trials.py, labs/verify/readers.py). A new row fails here
until every list that claims them all names it. The lists stay prose a reader can follow (the
docker image table is the one whose rows the test writes out); where one moves, its opening words
below move with it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs.findings.kinds import FINDING_KINDS
from labs.verify.readers import PROXIES as VERIFIED
from labs.verify.trials import CHECK_NAMES
from proxies.export import exports
from proxies.kind import ProxyKind
from proxies.kinds import KINDS
from proxies.runtime.images import official_image, offline_image, override_variable

REPO = Path(__file__).resolve().parent.parent


def passage(path: str, opening: str) -> str:
    """From `opening` to the end of its paragraph or list item, its lines joined (a list broken
    over two lines reads whole)."""
    text = (REPO / path).read_text(encoding="utf-8")
    assert opening in text, f"{path} no longer says {opening!r}: point this test at the list's new words"
    rest = text[text.index(opening):]
    ends = [at for at in (rest.find("\n\n"), rest.find("\n- "), rest.find("\n|")) if at >= 0]
    return " ".join(rest[:min(ends, default=len(rest))].split())


def word(kind: ProxyKind) -> str:
    """How prose names the proxy: its makers' name, first word ("Apache" for "Apache httpd")."""
    return kind.binary.title.split()[0]


def named(kind: ProxyKind, text: str) -> bool:
    return re.search(rf"\b{re.escape(word(kind))}\b", text) is not None


def unsaid(phrases: list[str], text: str) -> list[str]:
    return [phrase for phrase in phrases if phrase not in text]


def rows(path: str, header: str) -> list[str]:
    text = (REPO / path).read_text(encoding="utf-8")
    assert header in text, f"{path} lacks the table {header!r}"
    return text[text.index(header):].split("\n\n")[0].splitlines()[2:]


def first_column(path: str, header: str) -> list[str]:
    return [found[1] for row in rows(path, header) if (found := re.match(r"\| `([^`]+)` \|", row))]


TWO_RELEASES = [kind for kind in KINDS.values() if len(kind.releases) > 1]

# Passages that name every proxy the lab runs.
EVERY_PROXY = [
    pytest.param("README.md", "runs behind nginx", id="readme-what-it-is"),
    pytest.param("README.md", "`make setup` and `make test` install everything", id="readme-setup"),
    pytest.param("README.md", "**operators**", id="readme-operators"),
    pytest.param("README.md", "[docs/verify.md](docs/verify.md): nginx", id="readme-verify"),
    pytest.param("docs/proxies.md", "`proxies/fixed/` holds production configs", id="proxies-page"),
    pytest.param("docs/verify.md", "takes a proxy config exactly as you wrote it", id="verify-reads"),
]


@pytest.mark.parametrize(("path", "opening"), EVERY_PROXY)
def test_a_list_of_the_proxies_names_every_kind(path: str, opening: str) -> None:
    text = passage(path, opening)
    assert [word(kind) for kind in KINDS.values() if not named(kind, text)] == [], text


def test_the_hop_names_are_the_kinds_names() -> None:
    text = passage("docs/contract.md", "A scenario's path names its hops from the client inwards: proxies")
    listed = re.findall(r"`([a-z]+)`", text[:text.index(") and apps")])
    assert listed == list(KINDS)


def test_every_proxy_choice_offered_is_verifys_table() -> None:
    """`--proxy a|b|c` in a document or a usage line offers each proxy verify reads."""
    sources = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "labs" / "__main__.py"]
    offered = {f"{path.relative_to(REPO)}: {found}" for path in sources
               for found in re.findall(r"--proxy ([a-z]+(?:\|[a-z]+)+)", path.read_text(encoding="utf-8"))}
    assert offered, "no --proxy choice found: the pattern no longer reads the documents"
    assert [line for line in offered if set(line.split(": ")[1].split("|")) != set(VERIFIED)] == []


@pytest.mark.parametrize(("path", "opening"), [
    pytest.param("README.md", "The proxies run in the releases users run today", id="readme"),
])
def test_a_list_of_the_releases_names_every_release(path: str, opening: str) -> None:
    text = passage(path, opening)
    assert unsaid([f"{word(kind)} {release.series}" for kind in KINDS.values() for release in kind.releases],
                  text) == [], text


def test_verify_names_each_current_release_and_the_series_to_choose() -> None:
    current = passage("docs/verify.md", "**No flag**: each proxy's current release")
    assert unsaid([f"{word(kind)} {kind.current.series}" for kind in KINDS.values()], current) == [], current
    chosen = passage("docs/verify.md", "**`--proxy-version X.Y[.Z]`** of a series the lab has")
    pairs = [f"{word(kind)} {'/'.join(r.series for r in kind.releases)}" for kind in TWO_RELEASES]
    assert unsaid(pairs, chosen) == [], chosen


def test_the_testing_page_names_the_proxies_with_two_releases() -> None:
    both = passage("docs/testing.md", "A proxy with two releases")
    both = both[:both.index(";")]
    assert [kind.name for kind in KINDS.values() if named(kind, both)] == [kind.name for kind in TWO_RELEASES]
    assert unsaid([" and ".join(r.series for r in kind.releases) for kind in TWO_RELEASES], both) == [], both
    local = passage("docs/testing.md", "The local guards run each proxy's current release")
    assert unsaid([f"{word(kind)} {kind.current.series}" for kind in TWO_RELEASES], local) == [], local


def test_the_reload_signals_are_the_kinds_that_have_one() -> None:
    text = passage("docs/contract.md", "`RunningProxy.reload()`:")
    assert [k.name for k in KINDS.values() if named(k, text)] == [
        k.name for k in KINDS.values() if k.reload_signal is not None], text


def test_the_minimum_versions_are_the_binaries() -> None:
    text = passage("docs/environment.md", "checks every binary and its minimum version")
    minimums = [f"{word(kind)} {'.'.join(map(str, kind.binary.minimum))}" for kind in KINDS.values()]
    assert unsaid(minimums, text) == [], text


@pytest.mark.parametrize(("path", "opening"), [
    pytest.param("docs/proxies.md", "`proxies/fixed/nginx.conf`, `haproxy.cfg`", id="proxies-page"),
    pytest.param("docs/contract.md", "`proxies/fixed/nginx.conf`, `haproxy.cfg`", id="contract"),
])
def test_a_list_of_the_fixed_files_names_every_kinds_file(path: str, opening: str) -> None:
    text = passage(path, opening)
    assert [k.config_name for k in KINDS.values() if not re.search(rf"[`/]{re.escape(k.config_name)}`", text)] == []


def test_the_proven_on_table_names_every_file_and_release() -> None:
    """docs/proxies.md's table: each fixed file, and the releases a file is proven on."""
    table = rows("docs/proxies.md", "| proxy | file | proven on |")
    for export in exports().values():
        row = next((row for row in table if f"`{export.file}`" in row), None)
        assert row is not None, f"{export.file} is not in the table"
        labels = [release.label if len(KINDS[export.proxy].releases) > 1 else release.series
                  for release in export.releases]
        assert unsaid(labels, row) == [], row


def test_the_proxies_package_tables_each_kind() -> None:
    """proxies/README.md: each kind's releases, settings, template and exported files in one row."""
    table = rows("proxies/README.md", "| proxy | settings | template | exported |")
    for kind in KINDS.values():
        opening = f"| {kind.binary.title} {', '.join(r.series for r in kind.releases)} | "
        row = next((row for row in table if row.startswith(opening)), None)
        assert row is not None, f"no row opens with {opening!r}"
        files = [f"`fixed/{export.file}`" for export in exports().values() if export.proxy == kind.name]
        assert unsaid([f"`proxies.{kind.settings.__name__}`", f"`{kind.settings.template}`", *files], row) == [], row


@pytest.mark.parametrize(("path", "header"), [
    pytest.param("docs/environment.md", "| proxy | Debian 12 (this machine's package) |", id="environment"),
])
def test_a_table_of_the_proxies_names_every_kind(path: str, header: str) -> None:
    table = "\n".join(rows(path, header))
    assert [word(kind) for kind in KINDS.values() if not named(kind, table)] == [], table


def image_rows() -> list[str]:
    """docker/README.md's image table, one row per proxy release, as the runtime chooses them."""
    return [f"| {kind.binary.title} | {release.label}{', current' if release is kind.current else ''} | "
            f"`{official_image(name, release)}` | `{offline_image(name, release)}` | "
            f"`{override_variable(name)}` |"
            for name, kind in KINDS.items() for release in kind.releases]


def test_the_image_table_has_each_release_as_the_runtime_chooses_it() -> None:
    table = rows("docker/README.md", "| service | release | default: official image, pinned |")
    proxies = [row for row in table if not row.startswith(("| server |", "| apps", "| mcp"))]
    assert proxies == image_rows(), "docker/README.md's proxy rows should read:\n" + "\n".join(image_rows())


def test_the_front_page_lists_the_finding_kinds_in_order() -> None:
    text = passage("README.md", "Every finding has a `kind` from one fixed list")
    assert re.findall(r"`([^`]+)`", text[text.index("(") + 1:text.index(")")]) == list(FINDING_KINDS)


def test_the_contract_tables_the_finding_kinds_in_order() -> None:
    assert first_column("docs/contract.md", "| kind | means |") == list(FINDING_KINDS)


def test_the_verify_page_tables_every_check_in_order() -> None:
    header = "| check | what it sends | finding kind when it fails |"
    assert first_column("docs/verify.md", header) == list(CHECK_NAMES)


def test_a_stale_list_is_caught() -> None:
    """The reading above sees a list that lacks a kind: Traefik taken out of the front page's."""
    text = passage("README.md", "runs behind nginx").replace("Traefik", "")
    assert not named(KINDS["traefik"], text) and named(KINDS["caddy"], text)
