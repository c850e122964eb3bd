"""nginx as a proxy kind (proxies.kind): how its binary checks and runs a config, its logs, its image."""
from __future__ import annotations

import re
import signal

from proxies.nginx import fixed
from proxies.releases import Release
from proxies.unpack import add_packages
from proxies.kind import Account, Binary, Extra, Image, Logs, ProxyKind
from proxies.nginx.settings import NginxSettings
from proxies import probes
from proxies.logs import file_lines, parse_logfmt


def check(config: str, prefix: str) -> list[str]:
    # -p: every relative path resolves inside the prefix (a throwaway folder); -e: early errors
    # to stderr, not to the compiled-in /var/log/nginx/error.log (needs no root).
    return ["-t", "-q", "-p", prefix, "-c", config, "-e", "stderr"]


def run(config: str, prefix: str, listen: str) -> list[str]:
    # -p: the config's relative paths (pid, logs, temp folders) resolve inside the prefix;
    # -e stderr: start-up errors land in process.log, not in /var/log/nginx.
    return ["-p", prefix, "-c", config, "-e", "stderr"]


RELEASES = (Release("nginx", "1.22", "Debian 12"),
            Release("nginx", "1.30", "Debian sid", "sid", ("nginx-light",), ("/usr/sbin/nginx",),
                    image="nginx:1.30"))

# Dynamic modules a config may load that an unpacked release gets by need (verify adds them when a
# config loads one): a module loads only into the nginx build it was made for ("version 1022001
# instead of 1030006", measured), so each release takes its own suite's (Debian 12's nginx uses
# this machine's package). The extra that carries each, by the module's file name.
MODULE_EXTRAS = {"ngx_http_modsecurity_module.so": "nginx-modsecurity"}
MODSECURITY_PACKAGES = ("libnginx-mod-http-modsecurity", "modsecurity-crs")
MODSECURITY_MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"


def _modsecurity_present() -> bool:
    return all(release.in_root(MODSECURITY_MODULE).is_file() for release in RELEASES if release.unpacked)


def _add_modsecurity() -> None:
    for release in RELEASES:
        if release.unpacked:
            add_packages(release, MODSECURITY_PACKAGES)


KIND = ProxyKind(
    settings=NginxSettings, fixed=fixed.nginx,
    fixed_tls=(fixed.nginx_tls, "nginx-tls.conf"),
    # -e (1.19.5) is the newest thing the template and the commands rely on.
    binary=Binary("nginx", "nginx", ("-v",), re.compile(r"nginx/(\d+(?:\.\d+)+)"), (1, 19, 5),
                  apt="nginx"),
    check=check, run=run,
    # A new set of workers takes the new config; the old ones finish their requests
    # (https://nginx.org/en/docs/control.html).
    reload_signal=signal.SIGHUP,
    ready=(probes.port_open,),
    logs=Logs(access=file_lines("access.log"), parse=parse_logfmt, error_file="error.log"),
    writes_prefix=True,
    # The official image of exactly Debian 12's version. Started as root, nginx drops its workers
    # to `nobody` (group `nogroup` on Debian's build, `nginx` in the official image's): the names
    # must resolve; its compiled-in folders must exist in case a config leaves a path at its default.
    image=Image("nginx:1.22.1", "/usr/sbin/nginx", account=Account("nginx", 101),
                folders=("/var/log/nginx", "/var/lib/nginx")),
    kubernetes=(("ingress-nginx.yaml", "nginx/ingress-nginx.yaml.j2"),
                ("nginx-gateway-fabric.yaml", "nginx/nginx-gateway-fabric.yaml.j2"),
                ("f5-nginx-ingress.yaml", "nginx/f5-nginx-ingress.yaml.j2")),
    # 1.30 is the stable line since 1.29.7 made HTTP/1.1 with keep-alive the upstream default
    # (docs/field-notes.md#nginx-130). nginx-light is the smallest build with every module the
    # template uses (http_v2, ssl, realip, stub_status, gzip).
    releases=RELEASES,
    extras=(Extra("modsecurity", "nginx-modsecurity", "ModSecurity v3 for each unpacked nginx (its suite's "
                  "libnginx-mod-http-modsecurity and modsecurity-crs, added to its root)", None,
                  _modsecurity_present, _add_modsecurity),),
)
