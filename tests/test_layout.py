"""The shape of the code: the layers run one way."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_layers_run_one_way() -> None:
    """labs -> proxies -> server, each importing only those below it (the contract in pyproject.toml)."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    if not lint_imports.is_file():
        pytest.fail(f"{lint_imports} is missing: `make setup` installs import-linter (the test extra)")
    done = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"the import contract is broken:\n{done.stdout}\n{done.stderr}"
    assert "labs -> proxies -> server KEPT" in done.stdout, done.stdout

