"""Each proxy release in its own image: the stand-in of an unpacked release is its root, unpatched
and untouched; a container runs the binary of the release its config was rendered for, streams
through it, and the report's provenance names that release.

The rootfs check needs no engine; the others take `docker_engine` (marked `docker` by conftest).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from labs import provenance
from labs.fakes.upstream import FakeUpstream, fake_upstream
from proxies import variant
from proxies.binaries import parse_version
from proxies.kinds import KINDS
from proxies.releases import LOADER
from proxies.runtime.docker import run_proxy
from proxies.runtime.dockercli import docker
from proxies.runtime.offline_images import release_rootfs
from tests.runtimes import on_free_ports, require_images, stream

# nginx: the lesson that changed between releases (1.30's HTTP/1.1 upstream default); Caddy: the
# fixed config that does not load in the other release (buffer_requests renamed in 2.7).
CASES = [pytest.param(name, release.series, id=f"{name}-{release.series}")
         for name in ("nginx", "caddy") for release in KINDS[name].releases]


def test_an_unpacked_release_s_stand_in_is_its_root_unpatched(tmp_path: Path) -> None:
    """Its binary at the native path, hard-linked from the root (the host's copy in bin/ is the
    patched one), reaching its own loader through /lib64; /etc written without touching the root."""
    release = KINDS["nginx"].current
    fs, labels = release_rootfs(release, tmp_path / "rootfs")
    binary = fs.root / "usr/sbin/nginx"
    assert binary.stat().st_ino == release.in_root("/usr/sbin/nginx").stat().st_ino
    interpreter = subprocess.run(["patchelf", "--print-interpreter", str(binary)], capture_output=True,
                                 text=True, check=True).stdout.strip()
    assert interpreter == "/lib64/ld-linux-x86-64.so.2"  # Debian's, not a path into .proxies/
    assert os.readlink(fs.root / "lib64") == "usr/lib64" and (fs.root / LOADER).is_file()
    assert "nobody:x:65534" in (fs.root / "etc/passwd").read_text()
    assert not release.in_root("/etc/passwd").exists(), "the release's own root was written to"
    assert not (fs.root / "dev").exists()  # the engine gives a container its /dev
    assert labels["streamlab.version"] == release.installed_version()
    assert labels["streamlab.release"] == release.series


@pytest.fixture(scope="module")
def upstream(docker_engine: None) -> Iterator[FakeUpstream]:
    with fake_upstream() as server:
        yield server


def image_version(name: str, image: str) -> tuple[int, ...]:
    """The version the image's binary prints, run in a throwaway container."""
    binary = KINDS[name].binary
    done = docker(["run", "--rm", "--network", "none", "--entrypoint", KINDS[name].image.entrypoint, image,
                   *binary.version_args], check=False)
    match = binary.version_pattern.search(done.stdout + done.stderr)
    assert match, done.stdout + done.stderr
    return parse_version(match.group(1))


@pytest.mark.parametrize(("name", "series"), CASES)
def test_each_release_streams_its_fixed_config_in_its_own_image(name: str, series: str,
                                                                upstream: FakeUpstream) -> None:
    """The fixed config rendered for the release, in the release's image, whose binary is of that
    series: 20 events 50 ms apart arrive one read each."""
    image = require_images([name], {name: series})[name]
    assert parse_version(series) == image_version(name, image)[:2]
    settings = on_free_ports(variant(name, "fixed"), upstream.port).with_(version=series)
    with run_proxy(settings) as proxy:
        assert proxy.image == image
        result = stream(proxy.url + "/v1/chat/completions?n=20&interval=0.05&headers_delay_s=0.05")
    assert result.status == 200 and result.outcome == "complete" and result.content_events == 20
    assert result.bursts >= 17, result.content_reads  # a busy 2-core box may merge an odd pair


def test_the_releases_images_differ_and_provenance_names_the_release(docker_engine: None) -> None:
    oldest, current = KINDS["nginx"].releases[0], KINDS["nginx"].current
    images = [require_images(["nginx"], {"nginx": r.series})["nginx"] for r in (oldest, current)]
    assert images[0] != images[1]
    info = provenance.collect("docker", ["nginx"], {}, releases={"nginx": current.series},
                              server_in_runtime=False)
    origin = info["proxies"]["nginx"]
    assert origin["image"] == images[1] and origin["release"] == current.series
    if origin["chosen_by"] == "offline":  # a stand-in says the exact version it was built from
        assert origin["version"] == current.installed_version() and origin["source"] == current.source
        assert f"nginx {origin['version']} ({current.source}) image `{images[1]}`" in provenance.one_line(info)
    else:
        assert f"nginx {current.series} image `{images[1]}`" in provenance.one_line(info)
