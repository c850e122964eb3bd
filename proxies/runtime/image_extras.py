"""What a proxy's offline image needs beyond its binary and the libraries `ldd` lists for it.

Apache loads its modules at run time (a folder of shared objects). Varnish compiles every VCL to
C and builds it with the C compiler when it loads it, so its image carries the host's compiler
toolchain (gcc, binutils, the C library's headers and start files), taken from the Debian
packages that provide them (`dpkg -L`), about 200 MB; its vmods (std) are loaded at run time.
"""
from __future__ import annotations

import os
import subprocess
from typing import Iterable

APACHE_MODULES = "/usr/lib/apache2/modules"
VARNISH_LIBS = "/usr/lib/x86_64-linux-gnu/varnish"
# The packages whose files make `gcc -shared` work inside a scratch image (Debian 12's names).
SHELL_TOOLS = ("/bin/sh", "/bin/rm")
TOOLCHAIN_PACKAGES = ("gcc", "gcc-12", "cpp-12", "libgcc-12-dev", "libc6-dev", "linux-libc-dev",
                      "binutils", "binutils-x86-64-linux-gnu", "libc-dev-bin")


def package_files(packages: Iterable[str]) -> list[str]:
    """The regular files (and symlinks to them) the installed packages own."""
    result = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"dpkg -L {' '.join(packages)} failed (the Varnish image needs its "
                           f"compiler): {result.stderr.strip()[:300]}")
    return [line for line in result.stdout.splitlines() if os.path.isfile(line)]


def folder_files(folder: str) -> list[str]:
    return [os.path.join(base, name) for base, _dirs, names in os.walk(folder) for name in names]


def extra_files(service: str) -> list[str]:
    """Host files to copy into the image at the same paths (their libraries are added too)."""
    if service == "apache":
        return folder_files(APACHE_MODULES)
    if service == "varnish":
        # varnishd runs the compiler, and its own clean-up (`rm -rf vmod_cache`), through a shell.
        return [*SHELL_TOOLS, *folder_files(VARNISH_LIBS), *package_files(TOOLCHAIN_PACKAGES)]
    return []


def needs_ldd(path: str) -> bool:
    """Executables and shared objects: their libraries must be in the image too."""
    name = os.path.basename(path)
    return os.access(path, os.X_OK) and not name.endswith((".a", ".o", ".h")) or ".so" in name
