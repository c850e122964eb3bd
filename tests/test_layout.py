"""The shape of the code: the layers run one way, and no module grows past the size one reads whole."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "proxies", "labs")
MAX_LINES = 400


def test_layers_run_one_way() -> None:
    """labs -> proxies -> server, each importing only those below it (the contract in pyproject.toml)."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    if not lint_imports.is_file():
        pytest.fail(f"{lint_imports} is missing: `make setup` installs import-linter (the test extra)")
    done = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"the import contract is broken:\n{done.stdout}\n{done.stderr}"
    assert "labs -> proxies -> server KEPT" in done.stdout, done.stdout


def test_no_module_is_over_the_line_limit() -> None:
    modules = [path for package in PACKAGES for path in sorted((REPO_ROOT / package).rglob("*.py"))]
    assert len(modules) > 50, "the packages were not found"
    too_long = {str(path.relative_to(REPO_ROOT)): n for path in modules
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them along their seams): {too_long}"
