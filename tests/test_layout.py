"""The shape of the code: the layers run one way, and no module grows past the size one reads whole."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "proxies", "labs")
MAX_LINES = 400


def test_layers_run_one_way() -> None:
    """labs -> proxies -> server, each importing only those below it, and inside server/ and labs/
    their own floors (the contracts in pyproject.toml)."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    if not lint_imports.is_file():
        pytest.fail(f"{lint_imports} is missing: `make setup` installs import-linter (the test extra)")
    done = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"the import contract is broken:\n{done.stdout}\n{done.stderr}"
    assert "labs -> proxies -> server KEPT" in done.stdout, done.stdout
    # Inside the server, by job (server/__init__.py): a contract dropped from pyproject.toml fails here.
    assert "server: tools -> http -> apis -> stream -> engine -> text KEPT" in done.stdout, done.stdout
    assert "server's top modules import no job of the server KEPT" in done.stdout, done.stdout
    assert "labs: entry points -> products -> catalogue -> client KEPT" in done.stdout, done.stdout


def _private_names_from_other_packages(source: str, own: str) -> list[str]:
    """The `labs.X` imports in `source` (a module of the package or top-level module `own` of
    labs/) that name a `_private` module or name of another package: its insides, not its API."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            imported = [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            imported = [(alias.name, "") for alias in node.names]
        else:
            continue
        for module, name in imported:
            parts = module.split(".")
            dotted = [*parts[1:], name] if name else parts[1:]
            if parts[0] != "labs" or not dotted or dotted[0] == own:
                continue
            if any(part.startswith("_") and not part.startswith("__") for part in dotted):
                found.append(f"line {node.lineno}: {module}" + (f" import {name}" if name else ""))
    return found


def test_no_package_of_labs_imports_another_ones_private_names() -> None:
    """A product borrows no other package's `_name`: what several need is made public where it
    belongs (the stream driver in labs/client/driver.py, the lab's server and hops in labs/lab/)."""
    labs_root = REPO_ROOT / "labs"
    modules = sorted(labs_root.rglob("*.py"))
    assert len(modules) > 100, "labs/ was not found"
    borrowed = {}
    for path in modules:
        own = path.relative_to(labs_root).parts[0].removesuffix(".py")  # `bench`, `needs`
        if found := _private_names_from_other_packages(path.read_text(encoding="utf-8"), own):
            borrowed[str(path.relative_to(REPO_ROOT))] = found
    assert borrowed == {}


def test_private_names_from_other_packages_are_found() -> None:
    """The finder itself: another package's private name or module is found, in either import
    form; a package's own private names, dunders and public names are not."""
    source = ("from labs.load.streams import _runner, uvloop\n"
              "import labs.load._streams\n"
              "from labs.load import _no_gc_pauses\n"
              "def f():\n    from labs.client._driver import run\n"
              "from labs.bench._peers import x\n"
              "from labs.load.__main__ import main\n"
              "from labs import provenance\n")
    assert _private_names_from_other_packages(source, own="bench") == [
        "line 1: labs.load.streams import _runner", "line 2: labs.load._streams",
        "line 3: labs.load import _no_gc_pauses", "line 5: labs.client._driver import run"]


def test_no_module_is_over_the_line_limit() -> None:
    modules = [path for package in PACKAGES for path in sorted((REPO_ROOT / package).rglob("*.py"))]
    assert len(modules) > 50, "the packages were not found"
    too_long = {str(path.relative_to(REPO_ROOT)): n for path in modules
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them along their seams): {too_long}"


def _circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each a set of files that import
    one another in a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in imports.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back() -> None:
    """No circle of imports between the project's modules, type-checking imports included: a
    circle is a file and a piece cut out of it, held together by a lazy import; open it at the
    seam instead (grimp builds the graph, as import-linter does)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    assert len(imports) > 100, "the packages were not found"
    circles = _circles(imports)
    assert circles == [], "\n".join(" <-> ".join(c) for c in circles)


def test_circles_are_found() -> None:
    """The circle finder itself, on a loop of three and a tree."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_module_is_loaded_by_a_string() -> None:
    """`__import__` / `importlib.import_module` of the project's own modules hide an import from
    the layers' contract and the circle test: the project imports its modules by name."""
    loaded_by_string = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if "__import__(" in code or "import_module(" in code:
                    loaded_by_string.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert loaded_by_string == []
