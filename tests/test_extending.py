"""docs/extending.md's recipes stay true: every path a recipe names exists (for every proxy kind,
app hop, finding kind or catalogue layer its placeholder stands for), a new layer module is picked
up, and the app hop recipe names every field of a kind."""
from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

from labs import catalogue

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "extending.md"
# A code span that names a file or folder of the repository (placeholders in angle brackets).
PATH = re.compile(r"`((?:server|proxies|labs|tests|docker|docs)/[\w./<>-]*)`")


def _placeholders() -> dict[str, list[str]]:
    from labs.findings import KINDS as FINDING_KINDS
    from proxies.apps.kinds import APP_KINDS
    from proxies.kinds import KINDS as PROXY_KINDS
    layers = sorted(p.stem for p in (REPO / "labs" / "catalogue").glob("*.py")
                    if "SCENARIOS" in p.read_text(encoding="utf-8") and p.stem != "__init__")
    return {"<proxy>": sorted(PROXY_KINDS), "<hop>": sorted(APP_KINDS), "<layer>": layers,
            "<finding>": sorted(kind.judge.__module__.rsplit(".", 1)[1] for kind in FINDING_KINDS)}


def _expanded(path: str, values: dict[str, list[str]]) -> list[str]:
    for placeholder, names in values.items():
        if placeholder in path:
            return [p for name in names for p in _expanded(path.replace(placeholder, name), values)]
    return [path]


def test_every_path_a_recipe_names_exists() -> None:
    named = sorted(set(PATH.findall(DOC.read_text(encoding="utf-8"))))
    assert len(named) > 20, "the recipes name no paths: the pattern no longer reads them"
    values = _placeholders()
    # A placeholder no table names (`<config>`, `<id>`) stands for any name: some file must match.
    missing = [p for path in named for p in _expanded(path.rstrip("."), values)
               if not any(REPO.glob(re.sub(r"<[\w-]+>", "*", p)))]
    assert missing == [], f"docs/extending.md names paths that do not exist: {missing}"


def test_every_layer_module_that_declares_scenarios_is_in_the_catalogue() -> None:
    """The scenario recipe's step "a new layer module is added to labs/catalogue/__init__.py"."""
    listed = {s.name for s in catalogue.ALL}
    for layer in _placeholders()["<layer>"]:
        module = importlib.import_module(f"labs.catalogue.{layer}")
        names = {s.name for s in getattr(module, "SCENARIOS", ())}
        assert names <= listed, f"labs/catalogue/{layer}.py declares {sorted(names - listed)} outside the catalogue"


def test_the_app_hop_recipe_names_every_field_of_a_kind() -> None:
    """A field added to proxies.apps.kind.AppKind is a step of the recipe "an app hop"."""
    from proxies.apps.kind import AppKind
    text = DOC.read_text(encoding="utf-8")
    recipe = text[text.index("## Recipe: an app hop"):text.index("## Recipe: a finding kind")]
    fields = [field.name for field in dataclasses.fields(AppKind)]
    assert len(fields) >= 5, fields
    unnamed = [name for name in fields if f"`{name}`" not in recipe]
    assert unnamed == [], f"docs/extending.md's app hop recipe does not say what {unnamed} are"
