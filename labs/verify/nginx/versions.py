"""nginx's defaults by version: the ones a streaming route depends on, from nginx's CHANGES
(labs/verify/versions.py says how they are used).

When the intended version's defaults differ from the binary's, the rewrite writes the intended
version's values into the run explicitly (labs/verify/nginx/additions.py).
"""
from __future__ import annotations

from labs.verify.versions import DefaultsTable, Version, shown

__all__ = ["TABLE", "BASE", "Version", "shown"]

# name -> default as nginx 1.22 has it (the oldest version verify reads: Debian 12's, the one
# the lab runs). Written as the text a user would write to get it.
BASE: dict[str, str] = {
    "proxy_buffering": "on", "proxy_http_version": "1.0", "proxy_read_timeout": "60s",
    "proxy_send_timeout": "60s", "proxy_connect_timeout": "60s", "proxy_ignore_client_abort": "off",
    "proxy_request_buffering": "on", "proxy_buffer_size": "4k", "proxy_buffers": "8 4k",
    "proxy_cache": "off", "proxy_ignore_headers": "", "chunked_transfer_encoding": "on",
    "gzip": "off", "gzip_types": "text/html", "gzip_proxied": "off", "limit_conn": "",
    "proxy_set_header Connection": "close", "keepalive": "",
}
# (first version, what it changed, source): each later version keeps the earlier changes.
CHANGES: tuple[tuple[Version, dict[str, str], str], ...] = (
    ((1, 29, 7), {"proxy_http_version": "1.1", "proxy_set_header Connection": "", "keepalive": "32 local"},
     "nginx 1.29.7 (2026-03-24; stable from 1.30.0): HTTP/1.1 with keep-alive to upstreams by default "
     "(https://nginx.org/en/CHANGES, https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_http_version)"),
)
TABLE = DefaultsTable("nginx", BASE, CHANGES, oldest=(1, 22), kind="nginx")
