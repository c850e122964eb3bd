"""Fixtures every test package shares."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

from server.launcher import DEFAULT_MODEL_DIR, ServerHandle
from server.processes import PORTS_VARIABLE
from tests.runtimes import PROXIES, RUNTIMES, require_images

if TYPE_CHECKING:
    from labs.fakes.upstream import FakeUpstream
    from proxies.runtime.base import Runtime

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _worker_ports() -> None:
    """Under pytest-xdist (make test runs workers side by side), each worker takes its ports from
    a range of its own (server.processes.free_port), so no two pick the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit() and PORTS_VARIABLE not in os.environ:
        index = int(worker[2:]) % 12
        low = 20000 + index * 1000
        os.environ[PORTS_VARIABLE] = f"{low}-{low + 999}"


_worker_ports()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """make test's workers (pytest-xdist, --dist loadscope) take a module's or a class's tests
    together; the scenario guards' classes come first, as they are the longest to run."""
    guards = [item for item in items if item.nodeid.startswith("tests/test_scenarios.py::")]
    if guards and len(guards) < len(items):
        chosen = set(guards)
        items[:] = guards + [item for item in items if item not in chosen]

# The pytest plugin's tests run pytest inside pytest (tests/labs/probe/test_plugin.py).
pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def model_dir() -> str:
    """The tiny model `make setup` builds; built here (~3 s) when a test run starts without it,
    so a missing build step fails loudly elsewhere instead of skipping tests here."""
    if not (Path(DEFAULT_MODEL_DIR) / "config.json").is_file():
        from server.tools.model_builder import build

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


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> "Runtime":
    """The runtime under test (tests/proxies, tests/reliability), from the registry the labs use.
    Module scope: pytest runs every check for one runtime, then for the other, and checks the
    engine and images once."""
    from proxies.runtime import get_runtime
    if request.param == "docker":
        require_images(PROXIES)
    return get_runtime(request.param)


@pytest.fixture(scope="module")
def upstream() -> Iterator["FakeUpstream"]:
    """The fake upstream (labs.fakes) the proxies under test forward to: no limits of its own,
    every connection, request and body byte counted."""
    from labs.fakes.upstream import fake_upstream
    with fake_upstream() as server:
        yield server
