"""Check the rewritten config with the proxy's own binary, then run it as a local process.

The binary's message is the user's error message: its paths and lines are mapped back to the
user's files (`Rewritten.explain_error`), and the run ends with exit status 2.
"""
from __future__ import annotations

import contextlib
import subprocess
import urllib.request
from typing import Iterator

from labs.findings import UnusableInput
from labs.verify import containers
from labs.verify.rewrite import Rewritten
from proxies.binaries import binary
from proxies.runtime.local import PROCESS_LOG, foreground_args
from server.processes import ManagedProcess, ProcessFailed, managed, port_accepts

CHECK_TIMEOUT_S = 60


def check_command(rewritten: Rewritten) -> list[str]:
    main, prefix = str(rewritten.main), f"{rewritten.folder}/"
    if rewritten.proxy == "nginx":
        return [binary("nginx"), "-t", "-q", "-p", prefix, "-c", main, "-e", "stderr"]
    if rewritten.proxy == "haproxy":
        return [binary("haproxy"), "-c", "-f", main]  # no -q: it would hide the message
    return [binary("envoy"), "--mode", "validate", "-c", main, "-l", "error"]


def validate(rewritten: Rewritten, runtime: str = "local") -> None:
    """The proxy's own check; UnusableInput carries its message with the user's file and line."""
    if runtime == "docker" and not (choice := containers.image(rewritten)).offline:
        status, output = containers.check_in_container(rewritten, choice, check_command(rewritten)[1:])
    else:
        result = subprocess.run(check_command(rewritten), cwd=rewritten.folder, capture_output=True,
                                text=True, timeout=CHECK_TIMEOUT_S)
        status, output = result.returncode, result.stderr + result.stdout
    if status != 0:
        message, file, line = rewritten.explain_error(output.strip() or f"exit status {status}")
        raise UnusableInput(f"{rewritten.proxy} rejected the config:\n{message}", file=file, line=line)


class RunningConfig:
    """The user's rewritten config, running: where to send requests, what its logs say."""

    def __init__(self, rewritten: Rewritten, process: ManagedProcess) -> None:
        self.rewritten, self.process = rewritten, process

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rewritten.listen_port}"

    def log_text(self) -> str:
        parts = []
        for name in (PROCESS_LOG, "error.log", "access.log"):
            path = self.rewritten.folder / name
            if path.is_file():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)

    def admin(self, path: str) -> str:
        if self.rewritten.admin_port is None:
            raise NotImplementedError(f"{self.rewritten.proxy} has no admin endpoint")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.rewritten.admin_port}{path}", timeout=5) as r:
            return r.read().decode()


@contextlib.contextmanager
def running(rewritten: Rewritten, runtime: str = "local",
            ready_timeout_s: float = 20.0) -> Iterator[RunningConfig]:
    """Start the rewritten config in the foreground (a host process, or its container); stopped by
    its PID (or container id) when the block ends."""
    argv = [binary(rewritten.proxy), *foreground_args(rewritten.proxy, str(rewritten.main),
                                                      f"{rewritten.folder}/")]
    process = ManagedProcess(name=f"{rewritten.proxy} (verify)", argv=argv,
                             log_path=rewritten.folder / PROCESS_LOG, cwd=rewritten.folder)

    def ready() -> bool:
        if rewritten.admin_port is not None and not _http_ok(f"http://127.0.0.1:{rewritten.admin_port}/ready"):
            return False
        return port_accepts(rewritten.listen_port)
    try:
        if runtime == "docker":
            with containers.started(rewritten, containers.image(rewritten), ready, ready_timeout_s * 2) as started:
                yield RunningConfig(rewritten, started)
            return
        with managed(process, ready, ready_timeout_s) as started:
            yield RunningConfig(rewritten, started)
    except ProcessFailed as exc:
        message, file, line = rewritten.explain_error(str(exc))
        raise UnusableInput(f"{rewritten.proxy} did not start:\n{message}", file=file, line=line) from None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False

