"""The relay as an app hop (proxies.apps.kind): the lab's Python runs `tcp_relay.py`."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch
from proxies.apps.relay.settings import RelaySettings

PROGRAM = "proxies.apps.relay.tcp_relay"


def launch(settings: RelaySettings, workdir: Path, python: str) -> Launch:
    args = [python, "-m", PROGRAM, "--listen", settings.listen,
            "--upstream", f"{settings.upstream_host}:{settings.upstream_port}",
            "--seed", str(settings.seed), "--upstream-http", settings.upstream_http]
    if settings.split is not None:
        args += ["--split", f"{settings.split[0]}-{settings.split[1]}"]
    return Launch(args)


KIND = AppKind(
    settings=RelaySettings, launch=launch,
    # The standard library only: the program that ran is the version.
    versions=lambda: {"relay": "proxies/apps/relay/tcp_relay.py"}, needs=())
