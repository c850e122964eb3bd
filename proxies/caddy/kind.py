"""Caddy as a proxy kind (proxies.kind): its commands, the state folders it is given, its JSON
access lines, its image."""
from __future__ import annotations

import json
import re

from proxies.caddy import fixed
from proxies.caddy.settings import CaddySettings
from proxies.releases import Release
from proxies.kind import Binary, Image, Logs, ProxyKind
from proxies import probes
from proxies.logs import file_lines


def parse_json_line(line: str) -> dict[str, str]:
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


def state_folders(prefix: str) -> dict[str, str]:
    """Caddy keeps state (certificates, autosaved config) under HOME and the XDG folders: they
    point into its own folder, so nothing lands in the user's."""
    folder = prefix.rstrip("/")
    return {"HOME": folder, "XDG_CONFIG_HOME": folder, "XDG_DATA_HOME": folder}


def adapter(config: str) -> list[str]:
    """A Caddyfile names its adapter; Caddy's own JSON (`labs verify` runs it) needs none."""
    return [] if config.endswith(".json") else ["--adapter", "caddyfile"]


def check(config: str, prefix: str) -> list[str]:
    return ["validate", "--config", config, *adapter(config)]


def run(config: str, prefix: str, listen: str) -> list[str]:
    return ["run", "--config", config, *adapter(config)]


KIND = ProxyKind(
    settings=CaddySettings, fixed=fixed.caddy,
    # `transport http` `read_timeout` and `servers { timeouts }` (2.6).
    binary=Binary("caddy", "Caddy", ("version",), re.compile(r"v?(\d+\.\d+\.\d+)"), (2, 6), apt="caddy"),
    check=check, run=run, env=state_folders,
    # No reload signal: its admin API, the way it reloads, is off (nothing may reconfigure it).
    # It opens its port before it serves: only an answer proves it does.
    ready=(probes.port_open, probes.answers),
    logs=Logs(access=file_lines("access.log"), parse=parse_json_line),
    writes_prefix=True,
    image=Image("caddy:2.6.2", "/usr/bin/caddy"),  # Debian 12's version
    releases=(Release("caddy", "2.6", "Debian 12"),
              Release("caddy", "2.11", "Debian sid", "sid", ("caddy",), ("/usr/bin/caddy",),
                      image="caddy:2.11")),
)
