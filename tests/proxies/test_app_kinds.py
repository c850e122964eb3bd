"""The app hop kinds' table (proxies.apps.kinds), and the recipe "an app hop" it stands for: each
hop's folder holds its settings and its launch, every row answers each field the shared modules
read, and no shared module names a hop (a new one touches none of them)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from labs import catalogue
from labs.lab.hops import hop_kind
from proxies.apps.kind import AppKind
from proxies.apps.kinds import APP_KINDS, APP_NAMES, launch
from proxies.apps.launch import AppMissing, Launch
from proxies.needs import HOP_NEEDS, REQUIREMENTS

REPO = Path(__file__).resolve().parents[2]
APPS_DIR = REPO / "proxies" / "apps"
# The shared modules: what they do for a hop they read from its kind. Left out, as named by what
# they put on the machine (the `litellm` venv, Debian's `privoxy`), which a kind's `needs` names:
# the install steps (proxies/apps/install.py) and the requirements (proxies/needs.py). The
# catalogue's scenarios name the hops on their paths, as data.
UNSHARED = {APPS_DIR / "kinds.py", APPS_DIR / "install.py", REPO / "proxies" / "needs.py"}
SHARED = sorted(p for p in [*APPS_DIR.glob("*.py"), *(REPO / "proxies").glob("*.py"),
                            *(REPO / "proxies" / "runtime").glob("*.py"), *(REPO / "labs").rglob("*.py")]
                if p not in UNSHARED and "catalogue" not in p.relative_to(REPO).parts)


def test_every_folder_with_a_kind_is_in_the_table() -> None:
    folders = {path.parent.name for path in APPS_DIR.glob("*/kind.py")}
    assert folders == set(APP_KINDS), "a proxies/apps/<hop>/kind.py is one row of proxies.apps.kinds.APP_KINDS"


@pytest.mark.parametrize("name", APP_NAMES)
def test_the_folder_holds_the_kind(name: str) -> None:
    kind = APP_KINDS[name]
    assert isinstance(kind, AppKind) and kind.name == name
    for part in (kind.settings, kind.launch):
        assert part.__module__.startswith(f"proxies.apps.{name}."), f"{part} is not in proxies/apps/{name}/"
    assert (APPS_DIR / name / "settings.py").is_file() and (APPS_DIR / name / "kind.py").is_file()


@pytest.mark.parametrize("name", APP_NAMES)
def test_its_defaults_validate_and_launch(name: str, tmp_path: Path) -> None:
    """Its settings' defaults are a valid model that launches: a Launch whose program is a path
    (every runtime runs argv[0] as it is, a container by `--entrypoint`), or AppMissing saying
    what to install."""
    settings = APP_KINDS[name].settings()
    assert settings.app == name and type(settings).model_validate(settings.model_dump()) == settings
    addressed = settings.with_(listen_port=4001, upstream_port=4002)
    try:
        launched = launch(addressed, tmp_path)
    except AppMissing as exc:
        assert "install" in str(exc) or "make setup" in str(exc), exc
        return
    assert isinstance(launched, Launch) and Path(launched.argv[0]).is_absolute(), launched.argv
    # Its address and upstream reach it: in the argv, environment or a written file, or in what
    # clients ask it for (Jupyter's /proxy/PORT path, the origin a forward proxy is asked for).
    told = launched.shown() + launched.url_path + (launched.forward_origin or "")
    assert "4001" in told and "4002" in told, told


@pytest.fixture(scope="module")
def versions() -> dict[str, dict[str, str]]:
    return {name: kind.versions() for name, kind in APP_KINDS.items()}


@pytest.mark.parametrize("name", APP_NAMES)
def test_its_versions_answer(name: str, versions: dict[str, dict[str, str]]) -> None:
    """A report's provenance names each hop's own components: never empty, each value said, and
    never just another hop's (a reader that fell back on a sibling's)."""
    found = versions[name]
    assert found and all(isinstance(value, str) and value for value in found.values()), found
    alike = [other for other in APP_NAMES if other != name and set(versions[other]) == set(found)]
    assert not alike, f"{name} names the same components as {alike}: {found}"


@pytest.mark.parametrize("name", APP_NAMES)
def test_its_needs_and_image_are_declared(name: str) -> None:
    kind = APP_KINDS[name]
    assert set(kind.needs) <= set(REQUIREMENTS), f"{name} needs undeclared requirements {kind.needs}"
    assert HOP_NEEDS[name] == kind.needs  # set-up installs what the kind names
    try:
        paths = [*kind.image.programs(), *kind.image.files(), *kind.image.library_folders()]
    except AppMissing:
        return
    assert all(Path(path).is_absolute() for path in paths), paths


@pytest.mark.parametrize("name", APP_NAMES)
def test_a_scenario_runs_it(name: str) -> None:
    assert any(name in map(hop_kind, scenario.path) for scenario in catalogue.SCENARIOS), \
        f"no scenario puts {name} on its path"


def _hop_names_in(path: Path) -> list[str]:
    """Every string literal in the module that is a hop's name, and every import from a hop's folder."""
    folders = tuple(f"proxies.apps.{name}." for name in APP_KINDS)
    return [f"{path.relative_to(REPO)}:{node.lineno}: {getattr(node, 'value', None) or node.module!r}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in APP_KINDS
            or isinstance(node, ast.ImportFrom) and f"{node.module}.".startswith(folders)]


def test_no_shared_module_names_a_hop() -> None:
    """A new hop is its folder and one row: no table keyed by hop names, no branch on a name or
    on a hop's settings class, outside the hop's folder and the table."""
    assert len(SHARED) > 100, "the shared modules were not found"
    named = [hit for path in SHARED for hit in _hop_names_in(path)]
    assert not named, "shared modules naming a hop (declare it in its kind instead):\n" + "\n".join(named)


def test_the_contract_lists_the_table() -> None:
    """docs/contract.md names the hops a scenario's path may hold: exactly the table's rows."""
    text = (REPO / "docs/contract.md").read_text(encoding="utf-8")
    listed = re.search(r"and apps \(([^;]*); the rows of `proxies/apps/kinds.py`\)", text)
    assert listed, "docs/contract.md no longer lists the app hops where this test reads them"
    assert re.findall(r"`([\w-]+)`", listed.group(1)) == list(APP_NAMES)
