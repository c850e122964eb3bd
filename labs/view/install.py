"""Install Chromium for the browser view's tests and the browser-layer guards (stdlib only:
`make setup` runs it before .venv exists, beside `python -m proxies.install`).

Debian's `chromium` package, installed with apt-get when we are root and it is missing; otherwise
a clear message. Playwright drives this binary: its own browser download needs the internet.
"""
from __future__ import annotations

import os
import shutil
import sys

from proxies.install import install

PACKAGE = "chromium"
BINARIES = ("chromium", "chromium-browser", "google-chrome")


def found() -> str | None:
    configured = os.environ.get("STREAMLAB_CHROMIUM")
    if configured and os.access(configured, os.X_OK):
        return configured
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


def main() -> int:
    if found():
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print("error: Chromium is not installed; the browser view's tests need it. Install it with "
              "your package manager, e.g. `sudo apt-get install chromium`, or set "
              "STREAMLAB_CHROMIUM to a Chromium or Chrome binary.", file=sys.stderr)
        return 1
    install([PACKAGE])
    if not found():
        print("error: apt-get installed chromium, but no chromium binary is on PATH", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
