"""Which image runs each service: overrides, official, offline stand-ins, and one clear line when
none can be had. No engine needed: the engine calls are replaced by a set of local images."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxies.runtime import images
from proxies.runtime.dockercli import DockerError
from proxies.runtime.images import OFFICIAL, OFFLINE, ImageMissing, image_for

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
    local.update({OFFICIAL["nginx"], OFFLINE["nginx"]})
    assert image_for("nginx").image == "nginx:1.22.1"


def test_offline_stand_in_when_the_official_one_is_missing(local: set[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    local.add(OFFLINE["nginx"])
    choice = image_for("nginx")
    assert choice.image == "streamlab/nginx:host" and choice.offline
    notice = capsys.readouterr().err.strip()
    assert notice.count("\n") == 0 and "nginx:1.22.1 is not here" in notice


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
    images.forget_choices()
    monkeypatch.setenv("STREAMLAB_IMAGE_NGINX", "nginx:9.9")
    with pytest.raises(ImageMissing, match="STREAMLAB_IMAGE_NGINX=nginx:9.9"):
        image_for("nginx")


@pytest.mark.parametrize(("mode", "expected"), [("offline", OFFLINE["haproxy"]), ("official", None)])
def test_the_mode_insists(mode: str, expected: str | None, local: set[str],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    local.add(OFFLINE["haproxy"])
    monkeypatch.setenv("STREAMLAB_IMAGES", mode)
    if expected:
        assert image_for("haproxy").image == expected
    else:
        with pytest.raises(ImageMissing, match="cannot be pulled"):
            image_for("haproxy")


def test_the_server_image_is_built_never_pulled(local: set[str]) -> None:
    with pytest.raises(ImageMissing, match="docker/server.Dockerfile"):
        image_for("server")


@pytest.mark.parametrize("mode", ["auto", "official", "offline"])
def test_the_apps_run_in_their_stand_in_in_every_mode(mode: str, local: set[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMLAB_IMAGES", mode)
    with pytest.raises(ImageMissing, match="make images-offline"):
        image_for("apps")  # never pulled: no official image of this checkout's programs exists
    images.forget_choices()
    local.add(OFFLINE["apps"])
    assert image_for("apps").image == OFFLINE["apps"]
