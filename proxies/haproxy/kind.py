"""HAProxy as a proxy kind (proxies.kind): its binary, commands, `option httplog` lines, image."""
from __future__ import annotations

import re
import signal

from proxies.haproxy import fixed
from proxies.haproxy.settings import HaproxySettings
from proxies.releases import Release
from proxies.kind import Account, Binary, Image, Logs, ProxyKind
from proxies import probes
from proxies.logs import process_lines

# `option httplog` as `log stdout format raw` prints it, e.g.
# 127.0.0.1:5000 [30/Nov/2026:10:30:00.123] fe be/srv 0/0/0/2/2010 200 1234 - - ---- 1/1/0/0/0 0/0 "GET / HTTP/1.1"
HTTPLOG = re.compile(
    r'^(?P<client>\S+) \[(?P<accept_date>[^\]]+)\] (?P<frontend>\S+) (?P<backend>[^/\s]+)/(?P<server>\S+) '
    r'(?P<TR>-?\d+)/(?P<Tw>-?\d+)/(?P<Tc>-?\d+)/(?P<Tr>-?\d+)/(?P<Ta>\+?-?\d+) '
    r'(?P<status>-?\d+) (?P<bytes_read>\+?\d+) (?P<captured_request_cookie>\S+) '
    r'(?P<captured_response_cookie>\S+) (?P<termination_state>\S{4}) '
    r'(?P<actconn>\d+)/(?P<feconn>\d+)/(?P<beconn>\d+)/(?P<srv_conn>\d+)/(?P<retries>\+?\d+) '
    r'(?P<srv_queue>\d+)/(?P<backend_queue>\d+) "(?P<request>[^"]*)"')


def parse_httplog(line: str) -> dict[str, str] | None:
    match = HTTPLOG.match(line)
    return match.groupdict() if match else None


def check(config: str, prefix: str) -> list[str]:
    return ["-c", "-f", config]  # no -q: it would hide the message


def run(config: str, prefix: str, listen: str) -> list[str]:
    # -db: foreground, no daemon; -W: master-worker, so SIGUSR2 reloads (a new worker takes new
    # connections, the old one finishes its streams).
    return ["-W", "-db", "-f", config]


KIND = ProxyKind(
    settings=HaproxySettings, fixed=fixed.haproxy,
    # `log stdout` and the `http-reuse` modes the template uses (2.2).
    binary=Binary("haproxy", "HAProxy", ("-v",), re.compile(r"HA-?Proxy version (\d+(?:\.\d+)+)"),
                  (2, 2), apt="haproxy"),
    check=check, run=run,
    # In master-worker mode the master starts new workers, the old ones finish
    # (https://docs.haproxy.org/2.6/management.html).
    reload_signal=signal.SIGUSR2,
    ready=(probes.port_open,),
    # Its access lines go to stdout, among its other messages.
    logs=Logs(access=process_lines(parse_httplog), parse=parse_httplog),
    # The official image of exactly Debian 12's version.
    image=Image("haproxy:2.6.12", "/usr/local/sbin/haproxy",
                account=Account("haproxy", 99, "/var/lib/haproxy")),
    releases=(Release("haproxy", "2.6", "Debian 12"),
              Release("haproxy", "3.2", "Debian sid", "sid", ("haproxy",), ("/usr/sbin/haproxy",),
                      image="haproxy:3.2")),
)
