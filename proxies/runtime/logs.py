"""Parse the proxies' access logs into dicts (nginx, Envoy, Apache, Varnish: key=value;
HAProxy: httplog; Caddy: JSON)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

# The path the runtimes request to prove a proxy serves (its lines are left out of access logs).
READY_PATH = "/.streamlab-ready"
# varnishncsa's line for each client request, in the same key=value shape as nginx's: the
# handling (hit, miss, pass, synth) says whether the cache answered; ttfb is Varnish's own.
VARNISH_FORMAT = ('time=%{%Y-%m-%dT%H:%M:%S}t client=%h method=%m uri="%U" status=%s '
                  'handling=%{Varnish:handling}x duration_us=%D ttfb_s=%{Varnish:time_firstbyte}x '
                  'bytes_sent=%b')

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


def varnish_access_lines(workdir: Path) -> list[str]:
    """Varnish writes no log file: its shared-memory log is read on demand (`varnishncsa -d`
    prints every finished request still in it, then exits)."""
    from proxies.install import find_binary

    varnishncsa = find_binary("varnishncsa")  # in Debian's varnish package, beside varnishd
    if varnishncsa is None:
        return []
    try:
        result = subprocess.run([varnishncsa, "-n", str(workdir), "-d", "-F", VARNISH_FORMAT],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in result.stdout.splitlines() if line.startswith("time=")]


def parse_caddy_json(line: str) -> dict[str, str]:
    """One of Caddy's JSON access lines, flattened to the keys the other proxies use."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return {}
    request = record.get("request", {})
    return {"status": str(record.get("status", "")), "duration_s": str(record.get("duration", "")),
            "bytes_sent": str(record.get("size", "")), "method": str(request.get("method", "")),
            "uri": str(request.get("uri", "")), "proto": str(request.get("proto", "")),
            "level": str(record.get("level", ""))}
