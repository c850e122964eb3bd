"""A hop that runs what a Kubernetes controller would run for a manifest.

The variant's manifests (`Variant.manifest`) are translated exactly as `labs verify` translates a
user's (labs/verify/kubernetes: ingress-nginx -> nginx, Envoy Gateway -> Envoy), rewritten to
listen on loopback in front of the lab's server, checked with the proxy's own validator and
started like verify starts a user's config. So a scenario on this hop measures the config the
translation produces, the same text verify judges when a user hands it that manifest.
"""
from __future__ import annotations

import contextlib
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from labs.verify.launch import RunningConfig, running
from labs.verify.rewrite import Rewritten
from labs.verify.run import prepare, translated as translation_of
from proxies.kinds import KINDS as PROXY_KINDS
from proxies.logs import PROCESS_LOG, read_text
from server.processes import wait_until

MANIFEST_FILE = "manifest.yaml"


@dataclass(frozen=True)
class ManifestSettings:
    """What the runner reads of a hop's settings: its proxy (for its stats) and its ports."""

    proxy: str
    listen_port: int
    admin_port: int | None


class ManifestHop:
    """A running translation, as the runner sees any hop (proxies.runtime.base.RunningProxy)."""

    def __init__(self, manifest: str, started: RunningConfig) -> None:
        rewritten = started.rewritten
        self.config_text = manifest  # the report's diff shows what the user changes: the manifest
        self.started = started
        self.kind = PROXY_KINDS[rewritten.proxy]
        # Stats only where the rewritten config has an admin endpoint the runner can read.
        proxy = rewritten.proxy if self.kind.admin is not None and rewritten.admin_port else ""
        self.settings = ManifestSettings(proxy, rewritten.listen_port, rewritten.admin_port)

    @property
    def name(self) -> str:
        return self.started.rewritten.proxy

    @property
    def url(self) -> str:
        return self.started.url

    @property
    def pid(self) -> int:
        return self.started.process.pid

    @property
    def folder(self) -> Path:
        return self.started.rewritten.folder

    def access_log(self) -> list[str]:
        return self.kind.logs.access(self.folder, self.kind.release(self.started.rewritten.series))

    def wait_access_log(self, count: int, timeout_s: float = 5.0) -> list[str]:
        wait_until(lambda: len(self.access_log()) >= count, timeout_s,
                   describe=f"{count} access line(s) from {self.name}")
        return self.access_log()

    def access_entries(self) -> list[dict[str, str]]:
        return [entry for line in self.access_log() if (entry := self.kind.logs.parse(line))]

    def error_log(self) -> str:
        access = set(self.access_log())
        return "\n".join(line for line in read_text(self.folder / PROCESS_LOG).splitlines() if line not in access)

    def stats(self, prefix: str = "") -> dict[str, int]:
        admin, port = self.kind.admin, self.settings.admin_port
        if admin is None or port is None:
            raise NotImplementedError(f"stats() reads an admin endpoint; this {self.name} has none")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{admin.stats_path}", timeout=5) as response:
            counters = admin.parse_stats(response.read().decode())
        return {name: value for name, value in counters.items() if name.startswith(prefix)}

    def reload(self) -> None:
        raise NotImplementedError("a manifest hop is not reloaded: a controller rolls out a new config")


class ManifestMismatch(ValueError):
    """The manifests translate into another proxy than the scenario's path names (a catalogue error)."""


def translated(manifest: str, folder: Path) -> tuple[str, Path]:
    """(the proxy, the translated config's path) of these manifests (written into `folder`): the
    config as the controller would write it, its Service names and ports before any rewrite."""
    source = folder / MANIFEST_FILE
    source.write_text(manifest)
    found = translation_of(source)
    if found is None:
        raise ManifestMismatch("the variant's manifest holds no Kubernetes object verify translates")
    return found


def prepared(proxy: str, manifest: str, upstream_port: int, runtime: str, folder: Path,
             series: str | None = None) -> Rewritten:
    """The manifests' translation for `proxy`, rewritten in front of `upstream_port` into `folder`
    and passed by the validator of the proxy's release `series` (UnusableInput carries its message)."""
    made, config = translated(manifest, folder)
    if made != proxy:
        raise ManifestMismatch(f"the manifest translates into {made}'s config, but the path runs {proxy}")
    run_folder = folder / "run"
    run_folder.mkdir()
    return prepare(config, upstream_port, run_folder, proxy=proxy, runtime=runtime, series=series)


@contextlib.contextmanager
def manifest_hop(proxy: str, manifest: str, upstream_port: int, runtime: str,
                 series: str | None = None) -> Iterator[ManifestHop]:
    """The manifests' translation for `proxy`, run by its release `series` (default: the current
    one) in front of `upstream_port`; stopped on exit."""
    with tempfile.TemporaryDirectory(prefix=f"streamlab-manifest-{proxy}-") as scratch:
        rewritten = prepared(proxy, manifest, upstream_port, runtime, Path(scratch), series)
        with running(rewritten, runtime) as started:
            yield ManifestHop(manifest, started)
