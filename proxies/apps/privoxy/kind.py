"""Privoxy as an app hop (proxies.apps.kind): Debian's binary in the foreground, a forward proxy."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from proxies.apps.kind import AppImage, AppKind
from proxies.apps.launch import Launch, require
from proxies.apps.privoxy.settings import PrivoxySettings

# Privoxy's action and filter files as Debian ships them, read where they are (nothing under /etc
# is written); the run's own user.action and config sit in its folder.
PRIVOXY_ETC = Path("/etc/privoxy")
PRIVOXY_SHIPPED = ("match-all.action", "default.action", "default.filter")


def launch(settings: PrivoxySettings, workdir: Path, python: str) -> Launch:
    """Privoxy in the foreground: Debian's action and filter files, the run's user.action and
    config in its own folder (its confdir, relative: the reports of two runs diff cleanly)."""
    binary = shutil.which("privoxy") or "/usr/sbin/privoxy"
    require(Path(binary), "Privoxy (Debian: apt-get install privoxy)")
    for name in PRIVOXY_SHIPPED:
        require(PRIVOXY_ETC / name, f"Privoxy's {name}")
    user = (f"# The upstream's answers skip every content filter.\n{{ -filter }}\n{settings.upstream_host}\n"
            if settings.unfiltered_upstream else "# Nothing of the run's own.\n")
    # Debian's /etc/privoxy/config less its comments, with the run's folder and address. No
    # logfile: what Privoxy logs goes to stderr, the run's process log.
    config = "\n".join([
        "confdir .", *(f"actionsfile {PRIVOXY_ETC / name}" for name in PRIVOXY_SHIPPED[:2]),
        "actionsfile user.action", f"filterfile {PRIVOXY_ETC / PRIVOXY_SHIPPED[2]}",
        f"listen-address {settings.listen}",
        "toggle 1", "enable-remote-toggle 0", "enable-remote-http-toggle 0", "enable-edit-actions 0",
        "enforce-blocks 0", "buffer-limit 4096", "enable-proxy-authentication-forwarding 0",
        "forwarded-connect-retries 0", "accept-intercepted-requests 0", "allow-cgi-request-crunching 0",
        "split-large-forms 0", "keep-alive-timeout 5", "tolerate-pipelining 1", "socket-timeout 300", ""])
    # A forward proxy: clients ask it for the upstream's URLs (proxies.apps.launch.Launch).
    return Launch([os.path.realpath(binary), "--no-daemon", "config"],
                  files={"user.action": user, "config": config}, cwd=workdir,
                  forward_origin=settings.upstream)


def versions() -> dict[str, str]:
    """`privoxy --version` says "Privoxy version 3.0.34 (https://www.privoxy.org/)"."""
    try:
        out = subprocess.run(["privoxy", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {"privoxy": "not installed"}
    found = re.search(r"version (\S+)", out)
    return {"privoxy": found.group(1) if found else "unknown"}


def _installed() -> str | None:
    found = shutil.which("privoxy")
    return os.path.realpath(found) if found else None


KIND = AppKind(
    settings=PrivoxySettings, launch=launch, versions=versions, needs=("privoxy",),
    # A Debian package, not in the mounts: its binary and the files its launch reads, when installed.
    image=AppImage(programs=lambda: [binary] if (binary := _installed()) else [],
                   files=lambda: [str(PRIVOXY_ETC / name) for name in PRIVOXY_SHIPPED] if _installed() else []))
