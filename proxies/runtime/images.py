"""Which image runs each proxy (and the model server) in the Docker runtime.

    STREAMLAB_IMAGE_NGINX=nginx:1.27.3   always wins, per service (each proxy, every release; SERVER, APPS)
    STREAMLAB_IMAGES=official            the pinned official images (pulled when missing)
    STREAMLAB_IMAGES=offline             the stand-ins `make images-offline` builds from this machine's files
    STREAMLAB_IMAGES=auto (default)      official if present locally, else offline if built,
                                         else pull the official one; a one-line notice says which

A proxy has an image per release (proxies.releases), as it has a binary per release: this machine's
own release (Debian 12's) runs in the kind's pinned official image (`Image.official`, the version
the host runs) or in `streamlab/<proxy>:host`, the host's binary FROM scratch; an unpacked release
(nginx 1.30 from sid) runs in its own official image (`Release.image`) or in
`streamlab/<proxy>:<series>`, made from the release's unpacked root. Either way a container and a
host process run the same proxy version, and the labs measure the same thing.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from proxies.kinds import KINDS
from proxies.releases import Release
from proxies.runtime.dockercli import DockerError, docker, image_present

REPO_ROOT = Path(__file__).resolve().parents[2]

Service = str  # a proxy's name, "server", "apps" or "mcp"
SERVICES: tuple[Service, ...] = (*KINDS, "server", "apps", "mcp")
# Images that run this checkout's code with its installed packages, mounted: only the stand-in
# exists, whatever the mode (the app hops; the MCP origin's replicas, on both SDK lines).
MOUNTING: tuple[Service, ...] = ("apps", "mcp")
Mode = Literal["auto", "official", "offline"]
MODES: tuple[Mode, ...] = ("auto", "official", "offline")

OFFICIAL: dict[Service, str] = {
    **{name: kind.image.official for name, kind in KINDS.items()},
    "server": "streamlab/server:latest",  # built from docker/server.Dockerfile, never pulled
    # The app hops (Node, gunicorn, LiteLLM) run the working tree's programs and installed
    # packages: only the offline image, which mounts them, exists (this name is never used).
    "apps": "streamlab/apps:latest",
    "mcp": "streamlab/mcp:latest",  # likewise: the MCP origin runs this checkout's server/mcp
}
# Built by `make images-offline` (proxies.runtime.offline_images) from this machine's binaries.
OFFLINE: dict[Service, str] = {service: f"streamlab/{service}:host" for service in SERVICES}
BUILD_HINT = "run `make images-offline` to build stand-ins from this machine's files"


def release_for(service: Service, series: str | None = None) -> Release | None:
    """The proxy's release of that series (None: its current one); None for the server and apps.
    ValueError names the releases the lab has."""
    return KINDS[service].release(series) if service in KINDS else None


def official_image(service: Service, release: Release | None = None) -> str:
    """The official image of an unpacked release is its own; this machine's release runs the kind's."""
    return release.image if release is not None and release.unpacked and release.image else OFFICIAL[service]


def offline_image(service: Service, release: Release | None = None) -> str:
    """`streamlab/nginx:host` (the host's binary), `streamlab/nginx:1.30` (an unpacked release)."""
    return f"streamlab/{service}:{release.series}" if release is not None and release.unpacked else OFFLINE[service]


def _what(service: Service, release: Release | None) -> str:
    return f"{service} {release.label}" if release is not None and len(KINDS[service].releases) > 1 else service


class ImageMissing(RuntimeError):
    """No usable image for a service; the message says what to run or set."""


@dataclass(frozen=True)
class Choice:
    service: Service
    image: str
    why: str  # "STREAMLAB_IMAGE_NGINX", "official", "offline", ...
    release: Release | None = None  # the proxy's release it runs (None: the server, the apps)

    @property
    def offline(self) -> bool:
        """A stand-in: the same binary as this machine's copy of the release (so the host's check
        of a config is the container's check)."""
        return self.image == offline_image(self.service, self.release)


def override_variable(service: Service) -> str:
    return f"STREAMLAB_IMAGE_{service.upper()}"


def mode() -> Mode:
    value = os.environ.get("STREAMLAB_IMAGES", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"STREAMLAB_IMAGES={value!r}: use one of {', '.join(MODES)}")
    return value  # type: ignore[return-value]


_chosen: dict[tuple[Service, str | None], Choice] = {}


def image_for(service: Service, series: str | None = None) -> Choice:
    """The image for `service` (a proxy: of its release `series`, default the current one),
    present locally (pulled if it must be); cached per process. ImageMissing says what to run."""
    try:
        release = release_for(service, series)
    except ValueError as exc:
        raise ImageMissing(str(exc)) from None
    key = (service, release.series if release is not None else None)
    if key not in _chosen:
        _chosen[key] = _choose(service, release)
    return _chosen[key]


def forget_choices() -> None:
    """Drop the cache (after building images, or when the environment changed)."""
    _chosen.clear()


def _choose(service: Service, release: Release | None) -> Choice:
    variable = override_variable(service)
    if os.environ.get(variable):
        image = os.environ[variable]
        _ensure(image, f"{variable}={image}")
        return Choice(service, image, variable, release)
    wanted = mode()
    official, offline = official_image(service, release), offline_image(service, release)
    what = _what(service, release)
    if service in MOUNTING:  # only the stand-in exists, whatever the mode: it mounts this checkout
        if image_present(offline):
            return Choice(service, offline, "offline")
        raise ImageMissing(f"{service}: {offline} is not built; {BUILD_HINT} (it runs this "
                           "checkout's programs and installed packages)")
    if wanted == "offline":
        if not image_present(offline):
            raise ImageMissing(f"{what}: STREAMLAB_IMAGES=offline but {offline} is not built; {BUILD_HINT}")
        return Choice(service, offline, "offline", release)
    if image_present(official):
        return Choice(service, official, "official", release)
    if wanted == "auto" and image_present(offline):
        _notice(f"streamlab: {official} is not here; using {offline} (a stand-in built from this machine's "
                f"files; STREAMLAB_IMAGES=official to insist on the official image)")
        return Choice(service, offline, "offline", release)
    if service == "server":  # built, never pulled: there is no official server image
        raise ImageMissing(f"server: no image: `docker build -f docker/server.Dockerfile -t {official} .` "
                           f"(online) or {BUILD_HINT}")
    _ensure(official, f"{what}: {official}")
    return Choice(service, official, "official", release)


def _ensure(image: str, what: str) -> None:
    """Make sure `image` is local: pull it once if not; a failure says how to build stand-ins."""
    if image_present(image):
        return
    _notice(f"streamlab: pulling {image} ...")
    try:
        docker(["pull", "--quiet", image], timeout=900)
    except DockerError as exc:
        reason = str(exc).splitlines()[-1][-200:]
        raise ImageMissing(f"{what}: the image is not here and cannot be pulled ({reason}); "
                           f"{BUILD_HINT} (STREAMLAB_IMAGES=offline selects them)") from None


_said: set[str] = set()


def offline_server_labels(image: str) -> dict[str, str]:
    """The labels an offline server image carries: the interpreter and the host folders it mounts."""
    labels = docker(["image", "inspect", "--format", "{{json .Config.Labels}}", image]).stdout
    return json.loads(labels) or {}


def offline_server_built_here(image: str) -> bool:
    """Whether an offline server image mounts this checkout (it runs the working tree's code and
    .venv at their host paths, so one built for another folder would run that folder's code)."""
    mounts = [f for f in offline_server_labels(image).get("streamlab.mounts", "").split(":") if f]
    return str(REPO_ROOT) in mounts


def _notice(line: str) -> None:
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)
