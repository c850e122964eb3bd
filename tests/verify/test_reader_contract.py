"""Every reader of verify's table holds to the stages the pipeline runs (labs/verify/reader.py):
each fixed config of its proxy parses, is detected as its own, chooses a route, reads every
setting its rules name, rewrites to loopback only, and names no directive the rewrite neither
handles nor declares kept; every finding kind has a rule on every reader."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labs.findings.kinds import FINDING_KINDS
from labs.verify import route
from labs.verify.detect import detect
from labs.verify.model import RouteWanted
from labs.verify.plan import RunPlan, handled
from labs.verify.readers import READERS
from labs.verify.rewrite import is_loopback
from labs.verify.rules import fallback
from proxies.export import exports
from proxies.kinds import KINDS as PROXY_KINDS

ROOT = Path(__file__).resolve().parents[2]
FIXED = ROOT / "proxies" / "fixed"
# The fixed files a reader reads as they are (the Kubernetes manifests are translated first:
# tests/verify/test_kubernetes.py).
FILES = sorted(path for path in FIXED.iterdir() if path.is_file())
CASES = [pytest.param(path, id=path.name) for path in FILES if detect(path) in READERS]


def test_every_reader_is_a_proxy_of_the_lab() -> None:
    assert set(READERS) <= set(PROXY_KINDS)
    for name, reader in READERS.items():
        assert reader.proxy == name


@pytest.mark.parametrize("proxy", sorted(READERS))
def test_every_finding_kind_has_a_rule(proxy: str) -> None:
    reader = READERS[proxy]
    for kind in FINDING_KINDS:
        setting, general = fallback(reader.rules, kind)
        assert setting and general, (proxy, kind)


@pytest.mark.parametrize("path", CASES)
def test_a_fixed_config_runs_through_every_stage(path: Path, tmp_path: Path) -> None:
    reader = READERS[detect(path)]
    assert reader.shape.search(path.read_text()), "detected by its own shape"
    claimed = exports().get(path.name)  # the newest release a fixed file is written for (Caddyfile-2.6: 2.6)
    series = claimed.series[-1] if claimed else PROXY_KINDS[reader.proxy].current.series
    wanted = RouteWanted(series=series)
    config = reader.parse(path, wanted)
    chosen = route.choose(reader, config, wanted, path)
    assert chosen.route.describe and chosen.route.scope and chosen.routes
    in_effect = reader.settings(config, chosen, wanted)
    named = {rule.setting for rule in reader.rules}
    assert named <= set(in_effect.settings), f"rules name settings it does not read: {named - set(in_effect.settings)}"
    rewritten = reader.rewrite(config, chosen, RunPlan(65000, tmp_path, series=series))
    assert not any(tmp_path.iterdir()), "the rewrite writes nothing: the pipeline writes after the loopback check"
    addresses = reader.addresses(rewritten)
    assert addresses, "the rewritten config names the lab's server"
    assert all(is_loopback(host) for _, host in addresses), addresses
    unaccounted = sorted({name for name in reader.directives(config)
                          if not handled(reader.handlers, reader.kept, name)})
    assert not unaccounted, f"directives neither handled nor declared kept: {unaccounted}"


def test_one_request_per_path_carries_what_the_measured_requests_carry() -> None:
    """--header means the same for every proxy: each request the readers' `match` is asked about
    carries verify's own headers and --header's (names as a matcher reads them, any case), on
    every path tried, and never shows a value (they are credentials)."""
    wanted = RouteWanted(host="llm.example", headers=(("X-Team", "secret-a"),))
    asked = list(route.requests(wanted))
    assert [r.path for r in asked] == list(wanted.paths) and len(asked) > 1
    for request in asked:
        assert request.header("X-TEAM") == "secret-a" and request.header("accept") == "text/event-stream"
        assert request.header("host") == "llm.example" and request.header("x-other") is None
        assert "secret-a" not in repr(request)


@pytest.mark.slow
def test_a_type_checker_reads_the_table_against_the_protocol(tmp_path: Path) -> None:
    """READERS is typed `dict[str, ConfigReader]`: mypy refuses a reader that lacks a stage or
    answers one with another shape (the other modules' own errors are not this test's)."""
    mypy = Path(sys.executable).with_name("mypy")
    if not mypy.exists():
        pytest.fail(f"{mypy} is missing: `make setup` installs mypy (the test extra)")
    done = subprocess.run([str(mypy), "--follow-imports=silent", "--ignore-missing-imports", "--no-error-summary",
                           "--cache-dir", str(tmp_path), "labs/verify/readers.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
