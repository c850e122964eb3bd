"""The binaries' checks (proxies.binaries, which the installer runs): clear errors for a missing
or too old binary, every kind's version read."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proxies import binaries as install
from proxies.kinds import KINDS, PROXY_NAMES

REPO = Path(__file__).resolve().parents[2]


RELEASES = [pytest.param(kind.name, release.series, id=f"{kind.name}-{release.series}")
            for kind in KINDS.values() for release in kind.releases]


@pytest.mark.parametrize(("name", "series"), RELEASES)
def test_installed_binaries_pass(name: str, series: str) -> None:
    path, version = install.check_binary(name, series)
    assert Path(path).is_file() and version >= KINDS[name].binary.minimum
    release = KINDS[name].release(series)
    if release.unpacked:  # of the series it declares, from its own folder
        assert install.shown_version(version[:2]) == series and Path(path).is_relative_to(release.folder)


def test_binary_names_differ_from_proxy_names_where_debian_says_so() -> None:
    assert install.find_binary("varnish", "7.1") == install.find_binary("varnishd")
    assert install.find_binary("apache") == install.find_binary("apache2")


def test_the_current_release_is_the_default() -> None:
    assert install.find_binary("nginx") == install.find_binary("nginx", "1.30") != install.find_binary("nginx", "1.22")


def test_missing_binary_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "find_binary", lambda name, series=None: None)
    with pytest.raises(install.BinaryProblem, match=r"haproxy 2\.6 \(Debian 12\) not found\. Install it: apt-get install haproxy"):
        install.check_binary("haproxy", "2.6")
    with pytest.raises(install.BinaryProblem, match=r"haproxy 3\.2 \(Debian sid\) not found\. Install it: "
                       r"`python -m labs setup haproxy`"):
        install.check_binary("haproxy")


def test_an_unpacked_release_of_another_series_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's suite moves on: a sid that now holds nginx 1.31 is not the 1.30 the kind declares."""
    monkeypatch.setattr(install, "binary_version", lambda name, path: (1, 31, 0))
    with pytest.raises(install.BinaryProblem, match=r"nginx 1\.31\.0 at .* is not the 1\.30 \(Debian sid\) the lab declares"):
        install.check_binary("nginx", "1.30")


def test_an_unknown_release_names_the_known_ones() -> None:
    with pytest.raises(install.BinaryProblem, match=r"the lab runs nginx 1\.22 \(Debian 12\), 1\.30 \(Debian sid\), not 1\.24"):
        install.check_binary("nginx", "1.24")


def test_old_binary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "binary_version", lambda name, path: (1, 18, 0))
    with pytest.raises(install.BinaryProblem, match=r"nginx 1\.18\.0 at .* is too old: streamlab needs 1\.19\.5"):
        install.check_binary("nginx", "1.22")


@pytest.mark.parametrize(("name", "output", "version"), [
    ("nginx", "nginx version: nginx/1.22.1\n", (1, 22, 1)),
    ("haproxy", "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\n", (2, 6, 12)),
    ("envoy", "envoy  version: 9e55/1.40.0/Clean/RELEASE/BoringSSL\n", (1, 40, 0)),
    ("varnish", "varnishd (varnish-7.1.1 revision 7cee1c581bead20e88d101ab3d72afb29f14d87a)\n", (7, 1, 1)),
    ("apache", "Server version: Apache/2.4.71 (Debian)\nServer built:   2026-11-12T08:58:41\n", (2, 4, 71)),
    ("caddy", "2.6.2\n", (2, 6, 2)),
    ("caddy", "v2.8.4 h1:q3pe0wpBj1OcHFZ3n/1nl4V4bxBrYoSoab7rL9BMYNk=\n", (2, 8, 4)),
])
def test_version_patterns(name: str, output: str, version: tuple[int, ...]) -> None:
    match = KINDS[name].binary.version_pattern.search(output)
    assert match and install.parse_version(match.group(1)) == version


def test_the_installer_checks_every_kind() -> None:
    """`make setup` runs it with the project's environment, after the proxies are installed."""
    result = subprocess.run([sys.executable, "-m", "proxies.install", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        kind.name for kind in KINDS.values() for _ in kind.releases]
