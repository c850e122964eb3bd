"""Varnish as a proxy kind (proxies.kind): varnishd's commands (its listen address is a flag),
its access lines from the shared-memory log, and an image that carries a C compiler."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from proxies.varnish import fixed
from proxies.releases import Release
from proxies.kind import Binary, Image, Logs, ProxyKind, find_executable
from proxies import probes
from proxies.image_extras import folder_files, package_files
from proxies.logs import is_logfmt_access_line, parse_logfmt
from proxies.varnish.settings import VarnishSettings

STORAGE = "malloc,64m"  # the cache's storage: small, the lab caches a few answers at most
WORK_FOLDER = "varnish"  # in the prefix: its shared-memory log, which varnishncsa reads
# varnishncsa's line for each client request, in the same key=value shape as nginx's: the
# handling (hit, miss, pass, synth) says whether the cache answered; ttfb is Varnish's own.
ACCESS_FORMAT = ('time=%{%Y-%m-%dT%H:%M:%S}t client=%h method=%m uri="%U" status=%s '
                 'handling=%{Varnish:handling}x duration_us=%D ttfb_s=%{Varnish:time_firstbyte}x '
                 'bytes_sent=%b')
LIBS = "/usr/lib/x86_64-linux-gnu/varnish"  # its vmods (std), loaded at run time
# varnishd runs the compiler, and its own clean-up (`rm -rf vmod_cache`), through a shell.
SHELL_TOOLS = ("/bin/sh", "/bin/rm")
# The packages whose files make `gcc -shared` work inside a scratch image (Debian 12's names).
TOOLCHAIN_PACKAGES = ("gcc", "gcc-12", "cpp-12", "libgcc-12-dev", "libc6-dev", "linux-libc-dev",
                      "binutils", "binutils-x86-64-linux-gnu", "libc-dev-bin")


def access_lines(workdir: Path, release: Release) -> list[str]:
    """Varnish writes no log file: its shared-memory log is read on demand (`varnishncsa -d`
    prints every finished request still in it, then exits), by the varnishncsa of the release
    that wrote it (the log's layout is the version's own)."""
    varnishncsa = release.program("varnishncsa") or find_executable("varnishncsa")
    if varnishncsa is None:
        return []
    try:
        result = subprocess.run([varnishncsa, "-n", str(workdir / WORK_FOLDER), "-d", "-F", ACCESS_FORMAT],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in result.stdout.splitlines() if is_logfmt_access_line(line)]


def check(config: str, prefix: str) -> list[str]:
    # -C compiles the VCL to C (printed on stderr) and runs nothing; the compiler's scratch files
    # land in the working folder. -j none: as root Varnish would read the file as its own user,
    # which a private throwaway folder keeps out.
    return ["-C", "-j", "none", "-f", config]


def compiler_message(output: str) -> str:
    """The compiler's message, not the C it printed before failing."""
    return output.split("/* ---===###")[0]


def run(config: str, prefix: str, listen: str) -> list[str]:
    # -F: foreground. The listen address is a flag, not part of the VCL. -n: its own work folder
    # (shared-memory log included, which varnishncsa/varnishlog read); -T none: no management
    # port; -j none: no privilege separation, so the folder stays the caller's.
    return ["-F", "-a", listen, "-f", config, "-n", f"{prefix}{WORK_FOLDER}", "-s", STORAGE,
            "-T", "none", "-j", "none"]


def release_args(release: Release) -> list[str]:
    """An unpacked release loads its own vmods (std), not the ones at the compiled-in path,
    which on this machine are Debian 12's, built for another ABI."""
    return ["-p", f"vmod_path={release.in_root(LIBS)}/vmods"] if release.unpacked else []


def image_files() -> list[str]:
    """Varnish compiles every VCL to C and builds it with the C compiler when it loads it: its
    image carries the host's toolchain (gcc, binutils, the C library's headers and start files,
    from the Debian packages that provide them, about 200 MB) and its vmods."""
    return [*folder_files(LIBS), *package_files(TOOLCHAIN_PACKAGES)]


KIND = ProxyKind(
    settings=VarnishSettings, fixed=fixed.varnish,
    # VCL 4.1 with `sess.send_timeout` and triple-quoted strings (6.0).
    binary=Binary("varnishd", "Varnish", ("-V",), re.compile(r"varnish-(\d+(?:\.\d+)+)"), (6, 0),
                  apt="varnish"),
    check=check, check_message=compiler_message, run=run,
    # It opens its port before its child has loaded the VCL: only an answer proves it serves.
    ready=(probes.port_open, probes.answers),
    # Its start-up "Debug:" lines (its platform string has "-hcritbit" in it) are noise.
    logs=Logs(access=access_lines, parse=parse_logfmt, noise=("Debug:",)),
    writes_prefix=True,
    # Debian 12's version.
    image=Image("varnish:7.1.1", "/usr/sbin/varnishd", extra_files=image_files, tools=SHELL_TOOLS),
    # 7.7 is in trixie (Debian 13); sid has no Varnish. varnishncsa and varnishlog read their own
    # version's shared-memory log, so they come from the same release.
    releases=(Release("varnish", "7.1", "Debian 12"),
              Release("varnish", "7.7", "Debian trixie", "trixie", ("varnish",),
                      ("/usr/sbin/varnishd", "/usr/bin/varnishncsa", "/usr/bin/varnishlog"),
                      image="varnish:7.7")),
    release_args=release_args,
)
