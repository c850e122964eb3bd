"""Apache httpd as a proxy kind (proxies.kind): apache2's commands, its logs, and an image that
carries its modules."""
from __future__ import annotations

import os
import re
import signal

from proxies.apache import fixed
from proxies.apache.settings import MODULES_DIR, ApacheSettings
from proxies.releases import Release
from proxies.kind import Binary, Extra, Image, Logs, ProxyKind
from proxies import probes
from proxies.image_extras import folder_files, package_files
from proxies.logs import file_lines, parse_logfmt


def check(config: str, prefix: str) -> list[str]:
    # -d: the prefix is the ServerRoot, so relative log and pid paths resolve there.
    return ["-t", "-d", prefix.rstrip("/"), "-f", config]


def run(config: str, prefix: str, listen: str) -> list[str]:
    return ["-d", prefix.rstrip("/"), "-f", config, "-DFOREGROUND"]


def image_files() -> list[str]:
    """What the stand-in image carries beside the binary: Debian's module folder (mod_security2
    too, once libapache2-mod-security2 is installed) and, once installed, the OWASP core rule set."""
    crs = package_files(["modsecurity-crs"]) if os.path.exists(ApacheSettings.crs_setup) else []
    return [*folder_files(MODULES_DIR), *crs]


KIND = ProxyKind(
    settings=ApacheSettings, fixed=fixed.apache,
    # `LimitRequestBody` on proxied chunked bodies and mod_proxy's `flushpackets` (2.4.54).
    binary=Binary("apache2", "Apache httpd", ("-v",), re.compile(r"Apache/(\d+(?:\.\d+)+)"),
                  (2, 4, 54), apt="apache2"),
    check=check, run=run,
    # A graceful restart (https://httpd.apache.org/docs/2.4/stopping.html#graceful).
    reload_signal=signal.SIGUSR1,
    # It opens its port before a bad config makes it exit: only an answer proves it serves.
    ready=(probes.port_open, probes.answers),
    logs=Logs(access=file_lines("access.log"), parse=parse_logfmt, error_file="error.log"),
    writes_prefix=True,
    # Debian 12's version. It loads its modules at run time, from Debian's folder: the stand-in
    # carries them (the official image keeps them under /usr/local/apache2 and names its binary
    # httpd, so the template and the entrypoint would need changing to use it).
    image=Image("httpd:2.4.71", "/usr/sbin/apache2", extra_files=image_files),
    releases=(Release("apache", "2.4", "Debian 12"),),  # Debian 12's is the current 2.4 already
    # The WAF (labs/catalogue/waf.py): Debian 12's packages for this httpd.
    extras=(Extra("modsecurity", "apache-modsecurity", "ModSecurity 2 for Apache (Debian's "
                  "libapache2-mod-security2)", "libapache2-mod-security2",
                  lambda: os.path.exists(f"{MODULES_DIR}/mod_security2.so")),
            Extra("modsecurity_crs", "modsecurity-crs", "the OWASP core rule set (Debian's modsecurity-crs)",
                  "modsecurity-crs", lambda: os.path.exists(ApacheSettings.crs_setup))),
)
