"""verify's proxies are one table (labs/verify/readers.py), each a folder of its own: the shared
modules read the table and name no proxy, so a new one is a folder and a line."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labs.verify.readers import PROXIES, READERS
from proxies.kinds import KINDS as PROXY_KINDS

VERIFY = Path(__file__).resolve().parents[2] / "labs" / "verify"
# Every folder has its row and its stages' homes (and its own helpers beside them).
FOLDER_MODULES = ("reader.py", "config.py", "rules.py", "rewrite.py")


@pytest.mark.parametrize("proxy", PROXIES)
def test_each_proxy_is_a_folder_with_its_reader(proxy: str) -> None:
    reader = READERS[proxy]
    assert reader.proxy == proxy and type(reader).__module__ == f"labs.verify.{proxy}.reader"
    assert set(FOLDER_MODULES) <= {p.name for p in (VERIFY / proxy).glob("*.py")}
    assert {type(rule.suspect).__name__ for rule in reader.rules} <= {"function", "NoneType"}
    assert all(rule.suspect is None or rule.suspect.__module__.startswith(f"labs.verify.{proxy}.")
               for rule in reader.rules), "a reader's rules are its own"


def test_verify_reads_every_proxy_the_lab_runs() -> None:
    assert set(PROXIES) == set(PROXY_KINDS)


@pytest.mark.parametrize("proxy", PROXIES)
def test_detection_tells_each_proxys_own_fixed_config(proxy: str) -> None:
    """The table's order is detection's: each fixed config is recognised as its own proxy's."""
    path = VERIFY.parents[1] / "proxies" / "fixed" / PROXY_KINDS[proxy].config_name
    claimed = [k.proxy for k in READERS.values() if k.shape.search(path.read_text())]
    assert claimed[:1] == [proxy], f"{path.name} is claimed by {claimed}"


def _string_literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_no_shared_module_names_a_proxy() -> None:
    """Outside the proxies' folders, no module of labs/verify/ holds a proxy's name as a string
    (a branch or a table keyed by it): what differs per proxy is in its reader."""
    named = {}
    for path in sorted(VERIFY.glob("*.py")):
        found = _string_literals(path) & set(PROXIES)
        if found:
            named[path.name] = sorted(found)
    assert named == {}
