"""The release axis (proxies.releases, proxies.unpack, proxies.kinds.choose_releases): which
release a run chooses, where an unpacked one lies and how it runs, and what a failed unpack says."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from proxies.binaries import binary
from proxies.kinds import KINDS, choose_releases
from proxies.releases import FOLDER_VARIABLE, LOADER, Release
from proxies import unpack as unpack_module
from proxies.unpack import CannotUnpack, add_packages, unpack

UNPACKED = [pytest.param(release, id=f"{release.proxy}-{release.series}")
            for kind in KINDS.values() for release in kind.releases if release.unpacked]


def test_every_kind_starts_with_this_machines_binary_and_ends_with_its_current_release() -> None:
    for kind in KINDS.values():
        assert not kind.releases[0].unpacked and kind.current is kind.releases[-1]
        series = [tuple(map(int, r.series.split("."))) for r in kind.releases]
        assert series == sorted(series) and len(set(series)) == len(series), kind.name


def test_the_default_is_the_current_release_and_oldest_is_debian_12s() -> None:
    assert choose_releases(None, ["nginx", "haproxy"]) == {"nginx": "1.30", "haproxy": "3.2"}
    assert choose_releases("current", ["caddy"]) == {"caddy": "2.11"}
    assert choose_releases("oldest", ["nginx", "envoy", "varnish"]) == {"nginx": "1.22", "envoy": "1.40", "varnish": "7.1"}


def test_a_bare_series_picks_the_proxies_that_have_it() -> None:
    assert choose_releases("1.22", ["nginx", "haproxy"]) == {"nginx": "1.22", "haproxy": "3.2"}
    assert choose_releases("2.6", ["haproxy", "caddy"]) == {"haproxy": "2.6", "caddy": "2.6"}
    assert choose_releases("nginx=1.22,haproxy=2.6", ["nginx", "haproxy", "relay"]) == {"nginx": "1.22", "haproxy": "2.6"}


def test_a_release_the_lab_does_not_have_is_refused_with_what_it_has() -> None:
    with pytest.raises(ValueError, match=r"no proxy here has a release 1\.26: the lab runs nginx 1\.22 \(Debian 12\), "
                       r"1\.30 \(Debian sid\)"):
        choose_releases("1.26", ["nginx"])
    with pytest.raises(ValueError, match=r"unknown proxy 'ngnix'"):
        choose_releases("ngnix=1.30", ["nginx"])
    with pytest.raises(ValueError, match=r"the lab runs haproxy 2\.6 \(Debian 12\), 3\.2 \(Debian sid\), not 3\.3"):
        choose_releases("haproxy=3.3", ["haproxy"])
    # Over every scenario at once (run-all, the view), a series only some paths hold is no error.
    assert choose_releases("1.22", ["haproxy"], strict=False) == {"haproxy": "3.2"}


@pytest.mark.parametrize("release", UNPACKED)
def test_an_unpacked_program_loads_only_its_own_releases_libraries(release: Release) -> None:
    """Its ELF interpreter and library path point into its own root, so the host's Debian 12
    libraries are never mixed in (ldd run through that loader resolves every library there)."""
    program = binary(release.proxy, release.series)
    interpreter = subprocess.run(["patchelf", "--print-interpreter", program], capture_output=True, text=True)
    assert interpreter.stdout.strip() == str(release.root / LOADER)
    resolved = subprocess.run([str(release.root / LOADER), "--list", program], capture_output=True, text=True)
    assert resolved.returncode == 0, resolved.stderr
    libraries = [line.split("=>")[1].split()[0] for line in resolved.stdout.splitlines() if "=>" in line]
    assert libraries and all(Path(lib).is_relative_to(release.root) for lib in libraries), resolved.stdout


def test_a_failed_unpack_says_why_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path))
    release = Release("nginx", "9.9", "Debian sid", "sid", ("streamlab-no-such-package",), ("/usr/sbin/nginx",))
    with pytest.raises(CannotUnpack, match=r"mmdebstrap could not unpack streamlab-no-such-package from Debian sid"):
        unpack(release, lambda path: "9.9.0")
    assert list(tmp_path.iterdir()) == [] and release.installed_version() is None


def test_a_version_that_cannot_be_read_leaves_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record is written last: a release whose binary does not run is unpacked again next time."""
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path))
    release = Release("nginx", "1.30", "Debian sid", "sid", ("nginx-light",), ("/usr/sbin/nginx",))

    def unreadable(path: str) -> str:
        raise RuntimeError("no version")
    with pytest.raises(RuntimeError, match="no version"):
        unpack(release, unreadable)
    assert release.installed_version() is None and not release.folder.exists()
    version = unpack(release, lambda path: subprocess.run([path, "-v"], capture_output=True, text=True).stderr.split("/")[1].strip())
    assert version.startswith("1.30.") and release.installed_version() == version
    assert unpack(release, unreadable) == version  # recorded: nothing is unpacked or read again


def test_added_packages_bring_only_the_files_the_release_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module a config loads (proxies.nginx.kind.MODULE_EXTRAS) joins an unpacked release: its new
    files and links come in, the release's own (the programs already patched against them) stay."""
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path))
    release = Release("nginx", "9.9", "Debian sid", "sid", ("nginx-light",), ("/usr/sbin/nginx",))
    (release.root / "usr/lib").mkdir(parents=True)
    (release.root / "usr/lib/libc.so.6").write_text("the release's own")
    (release.root / "lib").symlink_to("usr/lib")  # merged /usr, as Debian lays it out
    (release.folder / "release.json").write_text('{"version": "9.9.1", "packages": ["nginx-light"]}')
    unpacked = []

    def extract(wanted: Release, root: Path) -> None:  # what mmdebstrap would unpack, offline
        unpacked.append(wanted.packages)
        (root / "usr/lib/nginx/modules").mkdir(parents=True)
        (root / "usr/lib/libc.so.6").write_text("the suite's, again")
        (root / "usr/lib/nginx/modules/ngx_http_modsecurity_module.so").write_text("module")
        (root / "usr/lib/libmodsecurity.so.3").symlink_to("libmodsecurity.so.3.0.16")
        (root / "lib").symlink_to("usr/lib")
    monkeypatch.setattr(unpack_module, "_extract", extract)
    add_packages(release, ("libnginx-mod-http-modsecurity",))
    assert unpacked == [("nginx-light", "libnginx-mod-http-modsecurity")]
    assert (release.root / "usr/lib/libc.so.6").read_text() == "the release's own"
    assert (release.root / "usr/lib/nginx/modules/ngx_http_modsecurity_module.so").read_text() == "module"
    assert os.readlink(release.root / "usr/lib/libmodsecurity.so.3") == "libmodsecurity.so.3.0.16"
    assert json.loads((release.folder / "release.json").read_text())["packages"] == [
        "nginx-light", "libnginx-mod-http-modsecurity"]
    add_packages(release, ("libnginx-mod-http-modsecurity",))  # recorded: nothing is unpacked again
    assert len(unpacked) == 1 and [p.name for p in tmp_path.iterdir()] == ["nginx-9.9"]


def test_packages_cannot_join_a_release_that_is_not_unpacked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path))
    release = Release("nginx", "9.9", "Debian sid", "sid", ("nginx-light",), ("/usr/sbin/nginx",))
    with pytest.raises(CannotUnpack, match="is not unpacked here"):
        add_packages(release, ("libnginx-mod-http-modsecurity",))
