"""What a lab installs is read off what it declares (labs/needs.py, proxies/needs.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labs import catalogue
from labs.client.libraries import LIBRARIES
from labs.lab.hops import hop_kind
from labs.needs import ALL, LIBRARY_NEEDS, everything, main, needs_of, scenario_needs, view_needs
from proxies.kinds import KINDS
from proxies.needs import HOP_NEEDS, CannotInstall, Requirement, install_missing
from proxies.runtime.images import SERVICES
from tests.ids import other_id

REPO_ROOT = Path(__file__).resolve().parents[2]


# An unpacked release needs Debian's tools that unpack it first (proxies.unpack).
TOOLS = ["mmdebstrap", "patchelf"]


def test_the_flagship_lab_needs_nginx_and_nothing_else() -> None:
    """Both of nginx's releases (the lab shows what 1.30 does and what 1.22 did)."""
    assert needs_of("nginx-buffering") == ["nginx", *TOOLS, "nginx-1.30"]


NEEDS = [
    ("express-compression", ["node-modules"]),
    ("nextjs-rewrites", ["node-modules", "next-build"]),
    ("litellm-heartbeats", ["nginx", *TOOLS, "nginx-1.30", "litellm"]),
    ("chain-edge-compression", ["varnish", *TOOLS, "varnish-7.7", "caddy", "caddy-2.11", "nginx", "nginx-1.30"]),
    ("client-requests-iter-lines", ["python-apps"]),
    ("browser-textdecoder", ["chromium", "python-browser"]),
    ("server-disconnect", []),
]


@pytest.mark.parametrize(("name", "expected"), NEEDS, ids=[other_id(name) for name, _ in NEEDS])
def test_each_lab_needs_what_its_path_client_and_driver_use(name: str, expected: list[str]) -> None:
    assert needs_of(name) == expected


def test_every_hop_and_library_of_the_catalogue_is_declared() -> None:
    hops = {hop_kind(hop) for scenario in catalogue.SCENARIOS for hop in scenario.path}
    assert hops <= set(HOP_NEEDS), f"hops without requirements: {hops - set(HOP_NEEDS)}"
    assert set(LIBRARY_NEEDS) <= set(LIBRARIES)
    declared = {name for needs in HOP_NEEDS.values() for name in needs} | {
        name for needs in LIBRARY_NEEDS.values() for name in needs}
    assert declared <= set(ALL)
    for scenario in catalogue.SCENARIOS:  # computable for every scenario, every name known
        assert set(scenario_needs(scenario)) <= set(ALL)


def test_everything_is_every_requirement_and_the_view_needs_no_browser_of_ours() -> None:
    assert set(everything()) == set(ALL)
    assert "chromium" not in view_needs() and "nginx" in view_needs()
    assert set(needs_of("load")) == {"nginx", "haproxy", "envoy", *TOOLS, "nginx-1.30", "haproxy-3.2"}


def test_make_check_installs_every_proxy_binary_its_tests_run_and_nothing_else() -> None:
    # The catalogue's test proves every proxy hop of every scenario with its binary, and
    # tests/proxies/test_settings.py every kind's settings: every kind, from its own package.
    # Every release's: the settings' test checks each release's defaults and fixed config.
    catalogued = {hop_kind(hop) for scenario in catalogue.SCENARIOS for hop in scenario.path} & set(KINDS)
    releases = {f"{r.proxy}-{r.series}" for kind in KINDS.values() for r in kind.releases if r.unpacked}
    assert set(needs_of("check")) == set(KINDS) | releases | set(TOOLS) and set(KINDS) >= catalogued
    # proxies' binaries only (and the tools that unpack them)
    assert all(ALL[name].check is not None for name in needs_of("check") if name not in TOOLS)
    assert not {"chromium", "node-modules", "litellm", "python-apps"} & set(needs_of("check"))


def test_make_check_sets_up_its_needs_before_its_tests() -> None:
    # make -n prints the recipe without running it (nor the venv's, whatever it would rebuild).
    out = subprocess.run(["make", "-n", "check"], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    setup = [i for i, line in enumerate(lines) if "-m labs setup check" in line]
    tests = [i for i, line in enumerate(lines) if "-m pytest" in line]
    assert setup and tests and setup[0] < tests[0], out.stdout


def test_only_what_is_missing_is_installed_and_a_failed_step_says_so() -> None:
    state = {"there": False}
    registry = {
        "present": Requirement("present", "already here", lambda: True,
                               install=lambda: pytest.fail("installed what was there")),
        "absent": Requirement("absent", "made by its step", lambda: state["there"],
                              install=lambda: state.update(there=True)),
        "broken": Requirement("broken", "a step that does nothing", lambda: False, install=lambda: None),
    }
    assert install_missing(["present", "absent"], registry) == ["absent"]
    assert install_missing(["present", "absent"], registry) == []  # the second run installs nothing
    with pytest.raises(CannotInstall, match="broken was installed but is still not usable"):
        install_missing(["broken"], registry)


def test_an_unknown_lab_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-lab"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no scenario named 'no-such-lab'") and "\n" not in err


def test_check_installs_nothing_and_reports_what_is_missing() -> None:
    out = subprocess.run([sys.executable, "-m", "labs", "setup", "--check", "nginx-buffering"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    assert out.returncode == (1 if not ALL["nginx"].present() else 0)


def test_a_docker_service_exists_for_every_proxy_requirement() -> None:
    # A release is an image of its proxy's service, not a service of its own.
    proxies = {name for name, r in ALL.items() if r.check is not None and name in KINDS}
    assert proxies == set(KINDS) <= set(SERVICES)
