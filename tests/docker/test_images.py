"""Which image runs each service (a proxy: each release its own): overrides, official, offline
stand-ins, and one clear line when none can be had. No engine needed: the engine calls are
replaced by a set of local images."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxies.runtime import images
from proxies.runtime.dockercli import DockerError
from proxies.kinds import KINDS
from proxies.runtime.images import OFFICIAL, OFFLINE, ImageMissing, image_for, offline_image

HOST_NGINX = KINDS["nginx"].releases[0].series  # Debian 12's 1.22: the host binary's image

PULL_FAILED = 'Error response from daemon: Get "https://registry-1.docker.io/v2/": no such host'


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The images 'present' on a fake engine; pulls fail (no registry), as on this machine."""
    present: set[str] = set()

    def pull(args: list[str], **_: object) -> None:
        raise DockerError(f"`docker {' '.join(args)}` failed (status 1): {PULL_FAILED}")

    monkeypatch.setattr(images, "image_present", lambda image: image in present)
    monkeypatch.setattr(images, "docker", pull)
    monkeypatch.setattr(images, "_said", set())  # notices are said once per process
    for name in ("STREAMLAB_IMAGES", "STREAMLAB_IMAGE_NGINX"):
        monkeypatch.delenv(name, raising=False)
    images.forget_choices()
    yield present
    images.forget_choices()


def test_the_pinned_official_image_first(local: set[str]) -> None:
    local.update({OFFICIAL["nginx"], OFFLINE["nginx"], "nginx:1.30", "streamlab/nginx:1.30"})
    assert image_for("nginx", HOST_NGINX).image == "nginx:1.22.1"
    assert image_for("nginx").image == "nginx:1.30"  # the current release's own


def test_offline_stand_in_when_the_official_one_is_missing(local: set[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    local.add(OFFLINE["nginx"])
    choice = image_for("nginx", HOST_NGINX)
    assert choice.image == "streamlab/nginx:host" and choice.offline
    notice = capsys.readouterr().err.strip()
    assert notice.count("\n") == 0 and "nginx:1.22.1 is not here" in notice


def test_each_release_runs_in_its_own_image(local: set[str]) -> None:
    """The host's binary and an unpacked release never share a stand-in: the one a run gets is
    the one of the release its config was rendered for."""
    current = KINDS["nginx"].current
    local.update({OFFLINE["nginx"], "streamlab/nginx:1.30"})
    old, new = image_for("nginx", HOST_NGINX), image_for("nginx")
    assert (old.image, new.image) == ("streamlab/nginx:host", "streamlab/nginx:1.30")
    assert old.offline and new.offline
    assert old.release is not None and old.release.series == HOST_NGINX and new.release == current
    # One image per release, and the host release's tag is the one it always had.
    assert offline_image("nginx", current) == "streamlab/nginx:1.30" != offline_image("nginx")


def test_a_missing_release_image_says_which_release_and_what_to_run(local: set[str]) -> None:
    local.add(OFFLINE["nginx"])  # only the host release's stand-in is built
    with pytest.raises(ImageMissing) as raised:
        image_for("nginx")
    message = str(raised.value)
    assert "\n" not in message and "make images-offline" in message
    assert "nginx 1.30 (Debian sid)" in message and "nginx:1.30" in message


def test_a_release_the_lab_does_not_have(local: set[str]) -> None:
    with pytest.raises(ImageMissing, match=r"not 9\.9") as raised:
        image_for("nginx", "9.9")
    assert "1.22" in str(raised.value) and "1.30" in str(raised.value)


def test_nothing_here_and_no_registry_says_what_to_run(local: set[str]) -> None:
    with pytest.raises(ImageMissing) as raised:
        image_for("envoy")
    message = str(raised.value)
    assert "\n" not in message
    assert "envoyproxy/envoy:v1.40.0" in message and "make images-offline" in message


def test_an_override_wins_and_is_never_replaced(local: set[str], monkeypatch: pytest.MonkeyPatch) -> None:
    local.update({"nginx:1.27.3", OFFLINE["nginx"]})
    monkeypatch.setenv("STREAMLAB_IMAGE_NGINX", "nginx:1.27.3")
    assert image_for("nginx").image == "nginx:1.27.3"
    assert image_for("nginx", HOST_NGINX).image == "nginx:1.27.3"  # every release: the user's choice
    images.forget_choices()
    monkeypatch.setenv("STREAMLAB_IMAGE_NGINX", "nginx:9.9")
    with pytest.raises(ImageMissing, match="STREAMLAB_IMAGE_NGINX=nginx:9.9"):
        image_for("nginx")


@pytest.mark.parametrize(("mode", "expected"), [("offline", "streamlab/haproxy:3.2"), ("official", None)])
def test_the_mode_insists(mode: str, expected: str | None, local: set[str],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    local.add("streamlab/haproxy:3.2")
    monkeypatch.setenv("STREAMLAB_IMAGES", mode)
    if expected:
        assert image_for("haproxy").image == expected
    else:
        with pytest.raises(ImageMissing, match="cannot be pulled"):
            image_for("haproxy")


def test_the_server_image_is_built_never_pulled(local: set[str]) -> None:
    with pytest.raises(ImageMissing, match="docker/server.Dockerfile"):
        image_for("server")


@pytest.mark.parametrize("service", images.MOUNTING)
@pytest.mark.parametrize("mode", ["auto", "official", "offline"])
def test_the_apps_and_the_mcp_origin_run_in_their_stand_in_in_every_mode(
        service: str, mode: str, local: set[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMLAB_IMAGES", mode)
    with pytest.raises(ImageMissing, match="make images-offline"):
        image_for(service)  # never pulled: no official image of this checkout's programs exists
    images.forget_choices()
    local.add(OFFLINE[service])
    assert image_for(service).image == OFFLINE[service]


def test_what_images_offline_builds() -> None:
    """A proxy's name is every release of it, `PROXY=X.Y` one; a release the lab lacks, or a
    release of a service that has none, is refused saying what there is."""
    from proxies.runtime.offline_images import targets
    assert targets(["nginx", "server"]) == [("nginx", HOST_NGINX), ("nginx", "1.30"), ("server", None)]
    assert targets(["caddy=2.11"]) == [("caddy", "2.11")]
    assert len(targets([])) == sum(len(kind.releases) for kind in KINDS.values()) + 3  # server, apps, mcp
    with pytest.raises(ValueError, match="1.22 .*not 9.9"):
        targets(["nginx=9.9"])
    with pytest.raises(ValueError, match="only a proxy"):
        targets(["server=1.0"])


def test_if_missing_rebuilds_an_mcp_image_without_an_sdk_line_installed_since(
        local: set[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`make docker-ready` after `labs setup` installed mcp 1.30: the image built before lacks it."""
    from proxies.runtime import offline_images
    local.add(OFFLINE["mcp"])
    monkeypatch.setattr(offline_images, "offline_server_built_here", lambda image: True)
    labels = {"streamlab.sdks": "2.3=/elsewhere/python"}
    monkeypatch.setattr(offline_images, "offline_server_labels", lambda image: labels)
    assert not offline_images._usable("mcp")
    assert "built before an SDK line was installed" in capsys.readouterr().out
    labels["streamlab.sdks"] = offline_images._sdks_label()  # what a build here writes
    assert offline_images._usable("mcp")
