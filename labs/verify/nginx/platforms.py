"""The platforms a site file is meant for: the stock main config it is included from, and what
that platform ships beside it.

A site file (a `server` block for `conf.d/` or `sites-enabled/`) inherits whatever the platform's
`nginx.conf` sets in `http {}`: the official image sets `keepalive_timeout 65` and leaves gzip
off, Debian's turns `gzip on` (for text/html only) and allows 768 connections per worker. verify
includes the user's file where the platform includes its sites, and says which platform it assumed.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labs.verify.mains import chosen

MAINS = Path(__file__).with_name("mains")
CONF_DIR = "/etc/nginx"  # where both platforms keep their configs (and relative includes resolve)
# Every nginx install has these beside nginx.conf; none sets a streaming directive.
COMMON_FILES = ("mime.types", "fastcgi_params", "scgi_params", "uwsgi_params")


@dataclass(frozen=True)
class Platform:
    name: str
    about: str
    main: Path  # the stock nginx.conf, byte for byte (mains/README.md says where from)
    site_includes: tuple[str, ...]  # the main's includes that load site files
    ships: tuple[str, ...]  # files under /etc/nginx the platform has, read from this machine's nginx

    def ships_file(self, relative: str) -> bool:
        return any(Path(relative).match(pattern) for pattern in self.ships)


PLATFORMS = {
    "official-image": Platform(
        "official-image", "the nginx Docker image's /etc/nginx/nginx.conf", MAINS / "official-image.conf",
        site_includes=("/etc/nginx/conf.d/*.conf",), ships=COMMON_FILES),
    "debian": Platform(
        "debian", "Debian 12's /etc/nginx/nginx.conf (nginx-common 1.22)", MAINS / "debian.conf",
        site_includes=("/etc/nginx/conf.d/*.conf", "/etc/nginx/sites-enabled/*"),
        ships=(*COMMON_FILES, "fastcgi.conf", "proxy_params", "koi-utf", "koi-win", "win-utf",
               "snippets/*.conf", "modules-enabled/*.conf")),
}
DEFAULT_PLATFORM = "official-image"


def platform(name_or_file: str) -> Platform:
    """`--main`: a platform's name, or the user's own main config (its site includes found in it)."""
    return chosen(name_or_file, PLATFORMS, lambda path: Platform(
        path.name, f"your main config {name_or_file}", path.resolve(), site_includes=(), ships=COMMON_FILES))
