"""verify's proxies are one table (labs/verify/kinds.py), each a folder of its own: the shared
modules read the table and name no proxy, so a new one is a folder and a line."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labs.verify.kind import ConfigKind
from labs.verify.kinds import KINDS, PROXIES
from labs.verify.readers import READERS
from proxies.kinds import KINDS as PROXY_KINDS

VERIFY = Path(__file__).resolve().parents[2] / "labs" / "verify"
FOLDER_MODULES = ("config.py", "read.py", "rules.py", "rewrite.py", "kind.py")


@pytest.mark.parametrize("proxy", PROXIES)
def test_each_proxy_is_a_folder_with_its_kind(proxy: str) -> None:
    kind = KINDS[proxy]
    if proxy in READERS:  # on the pipeline: tests/verify/test_reader_contract.py holds it to its stages
        assert kind is READERS[proxy] and {"reader.py", "rules.py", "rewrite.py"} <= {
            p.name for p in (VERIFY / proxy).glob("*.py")}
        return
    assert isinstance(kind, ConfigKind) and kind.proxy == proxy
    assert set(FOLDER_MODULES) <= {p.name for p in (VERIFY / proxy).glob("*.py")}  # and its own helpers
    assert kind.read.__module__ == f"labs.verify.{proxy}.read"
    assert kind.suspicions.__module__ == f"labs.verify.{proxy}.rules"


def test_every_proxy_has_a_fix_for_every_kind_verify_measures() -> None:
    """A measured fault that no setting explains still names a setting and a fix (judge.py)."""
    from labs.verify.trials import CHECK_KINDS
    measured = {kind for kinds in CHECK_KINDS.values() for kind in kinds}
    for proxy, kind in KINDS.items():
        if proxy in READERS:
            assert measured <= {rule.kind for rule in READERS[proxy].rules}
            continue
        assert measured <= set(kind.fallback), f"{proxy} lacks a fix for {measured - set(kind.fallback)}"


def test_verify_reads_every_proxy_the_lab_runs() -> None:
    assert set(PROXIES) == set(PROXY_KINDS)


@pytest.mark.parametrize("proxy", PROXIES)
def test_detection_tells_each_proxys_own_fixed_config(proxy: str) -> None:
    """The table's order is detection's: each fixed config is recognised as its own proxy's."""
    path = VERIFY.parents[1] / "proxies" / "fixed" / PROXY_KINDS[proxy].config_name
    claimed = [k.proxy for k in KINDS.values() if k.shape.search(path.read_text())]
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
    (a branch or a table keyed by it): what differs per proxy is in its ConfigKind."""
    named = {}
    for path in sorted(VERIFY.glob("*.py")):
        found = _string_literals(path) & set(PROXIES)
        if found:
            named[path.name] = sorted(found)
    assert named == {}
