"""Unpack a release from another Debian suite into its folder, once per machine (proxies.releases).

`python -m proxies.install` and `labs setup` call it for the releases a lab needs.

mmdebstrap's `extract` variant downloads the release's packages and everything they depend on
and unpacks them, running no maintainer script: about 3 s and 27 MB for nginx (debootstrap's
minimal base took 31-52 s and 313-534 MB for the same binaries here). Each program the lab runs is
then copied into `bin/` with patchelf pointing its ELF interpreter and its library path (RPATH,
which its libraries' own look-ups inherit) into the unpacked root, so it runs on this host
without a chroot. A failed step leaves no half-made release: it is unpacked beside the folder
and moved in place at the end.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

from proxies.releases import LIBRARY_DIRS, LOADER, Release
from server.processes import run_to_end

MIRROR = "http://deb.debian.org/debian"
# Debian's own tools, from this machine's packages (apt-get installs them when missing, as root).
TOOLS = {"mmdebstrap": "mmdebstrap", "patchelf": "patchelf"}


class CannotUnpack(RuntimeError):
    """A release cannot be unpacked here; the message says why and what to do."""


def missing_tools() -> list[str]:
    return [package for tool, package in TOOLS.items() if shutil.which(tool) is None]


def _install_tools() -> None:
    packages = missing_tools()
    if not packages:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise CannotUnpack(f"{', '.join(packages)} not installed: `sudo apt-get install {' '.join(packages)}`")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"installing {' '.join(packages)} with apt-get (to unpack proxy releases)", flush=True)
    # A fresh machine has no package lists yet.
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        done = run_to_end(command, env=env)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise CannotUnpack(f"`{' '.join(command)}` failed ({done.returncode}): {last}")


def _extract(release: Release, root: Path) -> None:
    # A mirror that serves a frozen snapshot has Release files past their Valid-Until date;
    # the packages are still signed by Debian's keys, which apt checks as always.
    command = ["mmdebstrap", "--quiet", "--variant=extract", "--aptopt=Acquire::Check-Valid-Until \"false\"",
               f"--include={','.join(release.packages)}", str(release.suite), str(root), MIRROR]
    if os.geteuid() != 0:
        command.insert(1, "--mode=unshare")
    result = run_to_end(command)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise CannotUnpack(f"mmdebstrap could not unpack {', '.join(release.packages)} from Debian "
                           f"{release.suite}: {last}")


def _patch(program: Path, root: Path) -> None:
    """Point a dynamically linked program at the release's loader and libraries."""
    interpreter = subprocess.run(["patchelf", "--print-interpreter", str(program)], capture_output=True, text=True)
    if interpreter.returncode != 0:
        return  # statically linked: it runs as it is
    libraries = ":".join(str(root / folder) for folder in LIBRARY_DIRS)
    subprocess.run(["patchelf", "--set-interpreter", str(root / LOADER), "--force-rpath", "--set-rpath",
                    libraries, str(program)], check=True, capture_output=True)


def add_packages(release: Release, packages: tuple[str, ...]) -> None:
    """Unpack more of the release's suite into its root, by need (a module a config loads, with its
    libraries): the packages are unpacked with the release's own beside it, and only the files its
    root lacks are copied in, so the programs already patched keep theirs. Their RPATH reaches the
    added libraries (a dlopen'd module's look-ups inherit it). The record lists them after."""
    record_file = release.folder / "release.json"
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError):
        raise CannotUnpack(f"{release.proxy} {release.label} is not unpacked here, so {', '.join(packages)} "
                           "cannot be added to it (`python -m labs setup` with a lab that runs it)") from None
    wanted = [package for package in packages if package not in record["packages"]]
    if not wanted:
        return
    _install_tools()
    work = Path(tempfile.mkdtemp(prefix=f".{release.folder.name}-more-", dir=release.folder.parent))
    try:
        _extract(replace(release, packages=(*release.packages, *wanted)), work / "root")
        _copy_absent(work / "root", release.root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record["packages"] += wanted
    record_file.write_text(json.dumps(record, indent=2) + "\n")


def _copy_absent(source: Path, target: Path) -> None:
    """Every file and link of `source` that `target` lacks, links kept as links."""
    for folder, folders, files in os.walk(source):  # a link to a folder is listed, not entered
        for name in [*files, *(f for f in folders if os.path.islink(os.path.join(folder, f)))]:
            here = Path(folder, name)
            there = target / here.relative_to(source)
            if not os.path.lexists(there):
                there.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(here, there, follow_symlinks=False)


def unpack(release: Release, read_version: Callable[[str], str]) -> str:
    """Unpack `release` (when its record is missing) and return the exact version it holds;
    `read_version(program)` reads the version the kind's binary prints."""
    recorded = release.installed_version()
    if recorded is not None and all(release.program(Path(p).name) for p in release.programs):
        return recorded
    _install_tools()
    release.folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{release.folder.name}-", dir=release.folder.parent))
    work.chmod(0o755)  # mkdtemp's 0700 would keep out a proxy's workers, which drop root
    try:
        _extract(release, work / "root")
        (work / "bin").mkdir()
        for inside in release.programs:
            source = work / "root" / inside.lstrip("/")
            if not source.exists():
                raise CannotUnpack(f"Debian {release.suite}'s {', '.join(release.packages)} has no {inside}")
            target = work / "bin" / source.name
            shutil.copy2(source, target)
            _patch(target, release.root)  # against the root's final place, where it is moved next
        if release.folder.exists():
            shutil.rmtree(release.folder)
        work.rename(release.folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        version = read_version(str(release.bin / Path(release.programs[0]).name))
    except Exception:
        shutil.rmtree(release.folder, ignore_errors=True)  # no record: the next run starts again
        raise
    # The record comes last: its presence says the release is whole.
    (release.folder / "release.json").write_text(json.dumps({
        "proxy": release.proxy, "series": release.series, "version": version, "suite": release.suite,
        "packages": list(release.packages)}, indent=2) + "\n")
    return version
