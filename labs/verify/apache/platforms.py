"""The platform a site file is meant for (its stock main config), and where an `Include` finds its
files when a config is read here rather than on the machine it was deployed on.

A site file for `sites-available/` inherits what Debian's `apache2.conf` and the modules it enables
set: `Timeout 300`, mpm_event's `MaxRequestWorkers 150`, mod_deflate for text types (not
text/event-stream). verify includes the user's file where that main includes its sites
(`IncludeOptional sites-enabled/*.conf`), and says it assumed that platform. The vendored files are
in `labs/verify/apache/mains/` (its README says which, and from where).

Includes: httpd resolves a relative path against its ServerRoot and globs the machine it runs on.
A config checked out of a repository means the files its project ships beside it: a relative
path is looked for beside the entry file, a deployed path (`/etc/apache2/conf.d/x.conf`,
`/usr/local/apache2/conf/extra/*.conf`) by its tail beside the entry; another absolute path is used
when it exists here. The platform's own includes read the vendored files. A file that is not
here is reported by name (`Include`; `IncludeOptional` may find nothing, as httpd allows).
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from labs.verify.mains import chosen

MAINS = Path(__file__).with_name("mains")
# Where configs are deployed: a path under one of these means the project's files, not this machine's.
DEPLOYED_ROOTS = ("/etc/apache2", "/etc/httpd", "/usr/local/apache2", "/usr/local/etc/apache24",
                  "/opt/bitnami/apache", "/etc/apache")
# `apache2 -l` of Debian's 2.4: modules an <IfModule> finds with no LoadModule.
BUILT_IN = ("core.c", "mod_so.c", "mod_watchdog.c", "http_core.c", "mod_log_config.c", "mod_logio.c",
            "mod_version.c", "mod_unixd.c", "log_config_module", "logio_module", "version_module",
            "unixd_module", "so_module", "watchdog_module")
GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Platform:
    name: str
    about: str
    main: Path  # the stock main config, byte for byte
    site_includes: tuple[str, ...]  # the main's includes that load site files
    defines: dict[str, str] = field(default_factory=dict)  # what its init script exports

    @property
    def folder(self) -> Path:
        return self.main.parent


DEBIAN = Platform(
    "debian", "Debian 12's /etc/apache2/apache2.conf (apache2 2.4.71, mods-enabled: the stock ones and "
    "proxy, proxy_http, headers, rewrite)", MAINS / "debian" / "apache2.conf",
    site_includes=("sites-enabled/*.conf",),
    # /etc/apache2/envvars, which apache2ctl and systemd source before starting apache2.
    defines={"APACHE_RUN_USER": "www-data", "APACHE_RUN_GROUP": "www-data",
             "APACHE_PID_FILE": "/var/run/apache2/apache2.pid", "APACHE_RUN_DIR": "/var/run/apache2",
             "APACHE_LOCK_DIR": "/var/lock/apache2", "APACHE_LOG_DIR": "/var/log/apache2"})
PLATFORMS = {"debian": DEBIAN}
DEFAULT_PLATFORM = "debian"


def platform(name_or_file: str) -> Platform:
    """`--main`: a platform's name, or the user's own main config (the site goes at its end)."""
    return chosen(name_or_file, PLATFORMS, lambda path: Platform(
        path.name, f"your main config {name_or_file}", path.resolve(),
        site_includes=("sites-enabled/*.conf", "sites-enabled/*", "/etc/apache2/sites-enabled/*.conf",
                       "conf.d/*.conf", "/etc/httpd/conf.d/*.conf"), defines=dict(DEBIAN.defines)))


@dataclass(frozen=True)
class Layout:
    entry_dir: str
    platform: Platform | None

    @classmethod
    def for_entry(cls, entry: str, platform: Platform | None) -> "Layout":
        return cls(os.path.dirname(os.path.abspath(entry)), platform)


def resolve(pattern: str, layout: Layout, including: str) -> list[str] | None:
    """The files `Include pattern` reads here, sorted as httpd's glob; [] for a glob that matches
    nothing; None: one named file that is not here."""
    pattern = pattern.strip('"')
    is_glob = any(c in pattern for c in GLOB_CHARS)
    platform = layout.platform
    if platform is not None and os.path.abspath(including).startswith(str(platform.folder) + os.sep):
        # The platform's own main and its files: relative to the vendored folder.
        base = str(platform.folder)
        if os.path.isabs(pattern):
            found = _beside(pattern, base)
        else:
            found = _glob(os.path.join(base, pattern))
    elif os.path.isabs(pattern):
        path = os.path.normpath(pattern)
        deployed = any(path == root or path.startswith(root + os.sep) for root in DEPLOYED_ROOTS)
        found = (_glob(path) if not deployed else []) or _beside(path, layout.entry_dir)
    else:
        found = _glob(os.path.join(layout.entry_dir, pattern)) or _beside("/" + pattern, layout.entry_dir)
    if found:
        return found
    return [] if is_glob else None


def _beside(path: str, folder: str) -> list[str]:
    """The path's tails beside the folder: conf.d/*.conf, then the file's own name."""
    parts = PurePosixPath(path).parts[1:]
    if not parts:
        return []
    tails = [os.path.join(*parts[i:]) for i in range(len(parts) - 1)]
    if not any(c in parts[-1] for c in GLOB_CHARS):
        tails.append(parts[-1])
    for tail in tails:
        found = _glob(os.path.join(folder, tail))
        if found:
            return found
    return []


def _glob(path: str) -> list[str]:
    if os.path.isdir(path):  # Include of a folder reads every file in it
        path = os.path.join(path, "*")
    return sorted(p for p in glob.glob(path) if os.path.isfile(p))
