"""What makes an app hop that hop, declared once in its own folder (`proxies/apps/<hop>/kind.py`)
and listed in one table (`proxies.apps.kinds.APP_KINDS`): its settings, how it is started, how
the versions that ran are read, what it needs installed and what its container takes from this
machine. The shared modules (both runtimes, provenance, set-up, the apps image) read these
fields; none of them names a hop.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from proxies.apps.launch import Launch
from proxies.apps.settings import AppSettings

# (its settings, the run's own work folder, the Python that runs the lab) -> what to run. Raises
# AppMissing when the hop's program or packages are not installed.
LaunchCommand = Callable[[Any, Path, str], Launch]
# () -> {"component": "version", ...} of what would run: never empty, "not installed" for a part
# that is missing (a report's provenance shows it).
VersionReader = Callable[[], dict[str, str]]
# () -> host paths: absolute, [] when what they belong to is not installed here.
HostPaths = Callable[[], list[str]]


def no_paths() -> list[str]:
    return []


@dataclass(frozen=True)
class AppImage:
    """What the offline apps image (proxies.runtime.offline_images) takes from this machine for
    the hop, beyond the repository, its .venv and .venvs, which the container mounts anyway."""

    # Programs it runs that no mount brings (node, Debian's privoxy), copied in with their
    # libraries. AppMissing for a program every image must hold (the image is not built without it).
    programs: HostPaths = no_paths
    files: HostPaths = no_paths  # host files those programs read at run time (Privoxy's action files)
    # Folders whose shared objects it loads (LiteLLM's venv): their system libraries go in the image.
    library_folders: HostPaths = no_paths


@dataclass(frozen=True)
class AppKind:
    """One app hop. Its name is its settings' class field `app`."""

    settings: type[AppSettings]  # its defaults are the app as commonly written (a scenario's broken side)
    launch: LaunchCommand
    versions: VersionReader
    # What it needs installed: names of proxies.needs.REQUIREMENTS, in install order (set-up
    # installs only what a lab's path uses).
    needs: tuple[str, ...]
    image: AppImage = field(default_factory=AppImage)
    # Makes, before the app starts, a folder it writes outside its work folder (Next.js: its own
    # dist folder, the setup build linked in with the run's upstream): (settings, work folder) ->
    # that folder. The runtime removes it after the run; a container mounts it writable.
    side_folder: Callable[[Any, Path], Path] | None = None

    @property
    def name(self) -> str:
        return self.settings.app
