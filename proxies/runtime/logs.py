"""Parse the proxies' access logs into dicts (nginx and Envoy: key=value; HAProxy: httplog)."""
from __future__ import annotations

import re

_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')
# `option httplog` as `log stdout format raw` prints it, e.g.
# 127.0.0.1:5000 [30/Nov/2026:10:30:00.123] fe be/srv 0/0/0/2/2010 200 1234 - - ---- 1/1/0/0/0 0/0 "GET / HTTP/1.1"
HTTPLOG = re.compile(
    r'^(?P<client>\S+) \[(?P<accept_date>[^\]]+)\] (?P<frontend>\S+) (?P<backend>[^/\s]+)/(?P<server>\S+) '
    r'(?P<TR>-?\d+)/(?P<Tw>-?\d+)/(?P<Tc>-?\d+)/(?P<Tr>-?\d+)/(?P<Ta>\+?-?\d+) '
    r'(?P<status>-?\d+) (?P<bytes_read>\+?\d+) (?P<captured_request_cookie>\S+) '
    r'(?P<captured_response_cookie>\S+) (?P<termination_state>\S{4}) '
    r'(?P<actconn>\d+)/(?P<feconn>\d+)/(?P<beconn>\d+)/(?P<srv_conn>\d+)/(?P<retries>\+?\d+) '
    r'(?P<srv_queue>\d+)/(?P<backend_queue>\d+) "(?P<request>[^"]*)"')


def parse_logfmt(line: str) -> dict[str, str]:
    """`key=value key="quoted value"` -> dict (quotes removed, "-" kept as nginx/Envoy print it)."""
    return {key: value[1:-1] if value.startswith('"') else value for key, value in _PAIR.findall(line)}


def is_logfmt_access_line(line: str) -> bool:
    return line.startswith("time=")


def parse_httplog(line: str) -> dict[str, str] | None:
    match = HTTPLOG.match(line)
    return match.groupdict() if match else None
