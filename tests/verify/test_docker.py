"""verify --runtime docker: the same user config, the proxy in its container (skips without an engine)."""
from __future__ import annotations

from pathlib import Path

import pytest

from labs.verify import verify_config
from labs.verify.model import RouteWanted
from proxies.kinds import KINDS
from tests.runtimes import require_images
from tests.verify.conftest import USER_CONFIGS, user_config_cases

pytestmark = [pytest.mark.docker, pytest.mark.slow]
CASES = {name: expected for name, expected in user_config_cases()}
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["nginx-debian-includes", "haproxy-user", "envoy-user"])
def test_user_config_in_its_container(verify_server, name):
    """On Debian 12's release, as the container pass of the guards (the configs' expected.json are
    written for it; test_dynamic holds what the current release finds otherwise)."""
    expected = CASES[name]
    proxy = {"nginx": "nginx", "haproxy": "haproxy", "envoy": "envoy"}[name.split("-")[0]]
    oldest = KINDS[proxy].releases[0].series
    require_images([proxy], {proxy: oldest})
    report = verify_config(USER_CONFIGS / name / expected["config"], quick=True, runtime="docker",
                           server=verify_server, wanted=RouteWanted(version=oldest), **expected.get("options", {}))
    failures = sorted({f.kind for f in report.findings if f.severity == "failure"})
    assert failures == sorted(expected["failures"]), [(c.name, c.observed) for c in report.checks]
    assert all(c.passed for c in report.checks if c.name == "loopback-only")
    assert "runs as the invoking user in a container" in report.rewrites or proxy == "envoy"


def test_a_traefik_buffering_fault_in_its_container(verify_server, tmp_path):
    """The run's file names itself and its access log by their paths in the run folder, which the
    container mounts at the same place: the fault is measured there as on the host."""
    from labs.catalogue.render import rendered
    require_images(["traefik"])
    path = tmp_path / "traefik.yml"
    path.write_text(rendered("traefik-buffering", "broken", "traefik")[1])
    report = verify_config(path, checks=["streaming"], runtime="docker", server=verify_server)
    assert [f.kind for f in report.failures()] == ["buffering"], [(c.name, c.observed) for c in report.checks]
    assert all(c.passed for c in report.checks if c.name == "loopback-only")


def test_the_fixed_vcl_in_its_current_release_container(verify_server, tmp_path):
    """Varnish 7.7 on the host loads its vmods from its unpacked root (a path only the host has);
    in the release's container they are at their native path, so `import std` loads there too."""
    from proxies.kinds import KINDS
    current = KINDS["varnish"].current
    require_images(["varnish"], {"varnish": current.series})
    path = tmp_path / "varnish.vcl"
    path.write_text((REPO / "proxies" / "fixed" / "varnish.vcl").read_text())
    assert "import std;" in path.read_text()
    report = verify_config(path, checks=["streaming"], runtime="docker", server=verify_server)
    assert not report.failures(), [(c.name, c.observed) for c in report.checks]
