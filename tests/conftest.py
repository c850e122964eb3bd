"""Fixtures every test package shares."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from server.launcher import DEFAULT_MODEL_DIR, ServerHandle

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The pytest plugin's tests run pytest inside pytest (tests/labs/probe/test_plugin.py).
pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def model_dir() -> str:
    """The tiny model `make setup` builds; built here (~3 s) when a test run starts without it,
    so a missing build step fails loudly elsewhere instead of skipping tests here."""
    if not (Path(DEFAULT_MODEL_DIR) / "config.json").is_file():
        from server.model_builder import build

        build(Path(DEFAULT_MODEL_DIR))
    return str(DEFAULT_MODEL_DIR)


@pytest.fixture(scope="session")
def tokenizer(model_dir: str):
    """The tiny model's tokenizer (server and reliability tests build apps in-process with it)."""
    from server.engine import load_tokenizer

    return load_tokenizer(model_dir)


@pytest.fixture(scope="session")
def synthetic_server() -> Iterator[ServerHandle]:
    """`python -m server --engine synthetic` with its default flags, one for the session: the
    modules that only stream through it (tests/proxies, tests/labs) share it instead of
    starting one each (a start costs seconds on a busy machine)."""
    from server.launcher import running_server

    with running_server(["--engine", "synthetic"]) as handle:
        yield handle
