"""The proxy kinds' table (proxies.kinds), and the recipe "add a proxy kind" it stands for: each
kind's folder holds what makes it that proxy, its binary accepts its fixed config through the
kind's own check command, and no shared module names a kind (a new one touches none of them)."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from labs import catalogue
from proxies.export import export_for
from proxies.validation import check_command
from proxies.kind import ProxyKind
from proxies.kinds import KINDS, PROXY_NAMES
from proxies.runtime.images import (OFFICIAL, OFFLINE, SERVICES, official_image, offline_image,
                                    override_variable)
from proxies.variants import variant

REPO = Path(__file__).resolve().parents[2]
PROXIES_DIR = REPO / "proxies"
# The shared modules: what they do for a proxy they read from its kind.
SHARED = sorted([*PROXIES_DIR.glob("*.py"), *(PROXIES_DIR / "runtime").glob("*.py"),
                 REPO / "labs" / "verify" / "launch.py", REPO / "labs" / "verify" / "containers.py"])
COMPOSE = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["services"]


def test_every_folder_with_a_kind_is_in_the_table() -> None:
    # proxies/apps/kind.py is the app hops' AppKind, with its own table (tests/proxies/test_app_kinds.py).
    folders = {path.parent.name for path in PROXIES_DIR.glob("*/kind.py") if path.parent != PROXIES_DIR / "apps"}
    assert folders == set(KINDS), "a proxies/<proxy>/kind.py is one row of proxies.kinds.KINDS"


@pytest.mark.parametrize("name", PROXY_NAMES)
def test_the_folder_holds_the_kind(name: str) -> None:
    kind = KINDS[name]
    folder = PROXIES_DIR / name
    assert isinstance(kind, ProxyKind) and kind.name == name
    assert type(kind).__module__ == "proxies.kind"
    for module in (kind.settings, kind.check, kind.run):
        assert module.__module__.startswith(f"proxies.{name}."), f"{module} is not in proxies/{name}/"
    assert (folder / "settings.py").is_file() and (folder / "kind.py").is_file()
    template = PROXIES_DIR / kind.settings.template
    assert template.parent == folder and template.is_file()


@pytest.mark.parametrize("name", PROXY_NAMES)
def test_its_fixed_configs_are_exported(name: str) -> None:
    for variant_name, file in KINDS[name].exports().items():
        assert (PROXIES_DIR / "fixed" / file).is_file(), f"python -m proxies export writes {file}"
        assert type(variant(name, variant_name)) is KINDS[name].settings
        for release in KINDS[name].releases:  # each release's file too, where its render differs
            held = export_for(name, variant_name, release.series).file
            assert (PROXIES_DIR / "fixed" / held).is_file(), f"python -m proxies export writes {held}"


@pytest.mark.parametrize("name", PROXY_NAMES)
def test_its_image_and_compose_service(name: str) -> None:
    kind = KINDS[name]
    assert name in SERVICES and OFFICIAL[name] == kind.image.official and OFFLINE[name]
    # The stand-in runs the host's binary under the name the host knows it by.
    assert kind.image.entrypoint == kind.binary.name
    service = COMPOSE[name]
    assert service["profiles"] == [name] and service["entrypoint"] == [kind.image.entrypoint]
    # Compose runs proxies/fixed/, rendered for the current release: by default in that release's image.
    defaults = (official_image(name, kind.current), offline_image(name, kind.current))
    assert service["image"] in {f"${{{override_variable(name)}:-{image}}}" for image in defaults}


@pytest.mark.parametrize("name", PROXY_NAMES)
def test_a_scenario_runs_it(name: str) -> None:
    assert any(name in scenario.path for scenario in catalogue.SCENARIOS), f"no scenario puts {name} on its path"


@pytest.mark.parametrize(("name", "series"), [
    pytest.param(kind.name, release.series, id=f"{kind.name}-{release.series}")
    for kind in KINDS.values() for release in kind.releases])
def test_the_binary_accepts_its_fixed_config_and_refuses_a_broken_one(name: str, series: str, tmp_path: Path) -> None:
    """The kind's check command, as validation, both runtimes and `labs verify` run it, is the
    binary's real check (of each release): it passes the exported config of that release
    (proxies.export: `Caddyfile-2.6` for Debian 12's Caddy) and fails one with a stray line."""
    kind = KINDS[name]
    fixed = PROXIES_DIR / "fixed" / export_for(name, "fixed", series).file
    results = []
    for folder, text in ((tmp_path / "fixed", fixed.read_text()),
                         (tmp_path / "broken", fixed.read_text() + "\nstreamlab-no-such-directive on;\n")):
        folder.mkdir()
        config = folder / kind.config_name
        config.write_text(text)
        done = subprocess.run(check_command(name, folder, series), cwd=folder,
                              env={**os.environ, **kind.env(f"{folder}/")},
                              capture_output=True, text=True, timeout=60)
        results.append((kind.check_refusal(done.returncode, done.stderr + done.stdout), done.returncode))
        shutil.rmtree(folder)
    (fixed_refusal, _), (broken_refusal, broken_status) = results
    assert fixed_refusal is None, fixed_refusal
    assert broken_refusal is not None, "the check accepted a broken config"
    assert broken_refusal != f"exit status {broken_status}", "the binary refused it without saying why"


def _kind_names_in(path: Path) -> list[str]:
    """Every string literal in the module that is a proxy's name or its binary's."""
    names = set(KINDS) | {kind.binary.name for kind in KINDS.values()}
    return [f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]


def test_no_shared_module_names_a_kind() -> None:
    """A new kind is its folder and one row: no table keyed by proxy names, no branch on a name,
    outside the kind modules."""
    assert len(SHARED) > 20, "the shared modules were not found"
    named = [hit for path in SHARED for hit in _kind_names_in(path)]
    assert not named, "shared modules naming a kind (declare it in the kind instead):\n" + "\n".join(named)
