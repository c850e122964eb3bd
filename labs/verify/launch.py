"""Check the rewritten config with the proxy's own binary, then run it as a local process.

The binary's message is the user's error message: its paths and lines are mapped back to the
user's files (`Rewritten.explain_error`), and the run ends with exit status 2.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Iterator

from labs.findings import UnusableInput
from labs.verify import containers
from labs.verify.rewrite import FAILS_THE_CHECK, Rewritten
from proxies.binaries import BinaryProblem, binary
from proxies.kind import Endpoint
from proxies.kinds import KINDS
from proxies.releases import Release
from proxies import probes
from proxies.logs import PROCESS_LOG
from server.processes import ManagedProcess, ProcessFailed, managed

CHECK_TIMEOUT_S = 60


def check_args(rewritten: Rewritten, runtime: str = "local") -> list[str]:
    """The kind's check, after the binary, on the rewritten main file (its run folder the prefix).
    The container mounts that folder at its own path, so the same arguments serve there."""
    kind = KINDS[rewritten.proxy]
    return [*kind.check(str(rewritten.main), f"{rewritten.folder}/"), *host_release_args(rewritten, runtime)]


def run_args(rewritten: Rewritten, runtime: str = "local") -> list[str]:
    """The kind's foreground run, after the binary, of the rewritten config."""
    kind = KINDS[rewritten.proxy]
    return [*kind.run(str(rewritten.main), f"{rewritten.folder}/", f"127.0.0.1:{rewritten.listen_port}"),
            *host_release_args(rewritten, runtime)]


def host_release_args(rewritten: Rewritten, runtime: str) -> list[str]:
    """What a host process of the release adds (paths into its unpacked root); a container of
    the release has its files at their native paths."""
    return [] if runtime == "docker" else KINDS[rewritten.proxy].release_args(release(rewritten))


def release(rewritten: Rewritten) -> Release:
    """The proxy's release that runs the rewritten config (proxies.releases)."""
    return KINDS[rewritten.proxy].release(rewritten.series)


def program(rewritten: Rewritten) -> str:
    """The binary of that release on this machine; UnusableInput says what to install when it is
    not installed (exit 2, one line)."""
    try:
        return binary(rewritten.proxy, release(rewritten).series)
    except BinaryProblem as exc:
        raise UnusableInput(str(exc)) from None


def kind_env(rewritten: Rewritten) -> dict[str, str]:
    """The variables the kind sets for its check and run, pointed at the run folder."""
    return KINDS[rewritten.proxy].env(f"{rewritten.folder}/")


def validate(rewritten: Rewritten, runtime: str = "local") -> None:
    """The proxy's own check; UnusableInput carries its message with the user's file and line."""
    kind = KINDS[rewritten.proxy]
    if runtime == "docker" and not (choice := containers.image(rewritten, release(rewritten).series)).offline:
        status, output = containers.check_in_container(rewritten, choice, check_args(rewritten, runtime),
                                                       kind_env(rewritten))
    else:
        result = subprocess.run([program(rewritten), *check_args(rewritten)], cwd=rewritten.folder,
                                env={**os.environ, **kind_env(rewritten)}, capture_output=True,
                                text=True, timeout=CHECK_TIMEOUT_S)
        status, output = result.returncode, result.stderr + result.stdout
    refusal = kind.check_refusal(status, output)
    if refusal is not None:
        message, file, line = rewritten.explain_error(refusal)
        # What the rewrite had to leave out often is the cause (a module not installed for this build).
        said = "".join(f"\n(verify: {note})" for note in rewritten.notes if note.endswith(FAILS_THE_CHECK))
        raise UnusableInput(f"{rewritten.proxy} rejected the config:\n{message}{said}", file=file, line=line)


class RunningConfig:
    """The user's rewritten config, running: where to send requests (its records are its kind's:
    Rewritten.contacted)."""

    def __init__(self, rewritten: Rewritten, process: ManagedProcess) -> None:
        self.rewritten, self.process = rewritten, process

    @property
    def url(self) -> str:
        return f"{'https' if self.rewritten.tls else 'http'}://127.0.0.1:{self.rewritten.listen_port}"


@contextlib.contextmanager
def running(rewritten: Rewritten, runtime: str = "local",
            ready_timeout_s: float = 20.0) -> Iterator[RunningConfig]:
    """Start the rewritten config in the foreground (a host process, or its container); stopped by
    its PID (or container id) when the block ends."""
    endpoint = Endpoint("127.0.0.1", rewritten.listen_port, rewritten.admin_port)

    def ready() -> bool:
        return probes.ready(KINDS[rewritten.proxy].ready, endpoint)
    try:
        if runtime == "docker":
            with containers.started(rewritten, containers.image(rewritten, release(rewritten).series),
                                    run_args(rewritten, runtime), kind_env(rewritten), ready,
                                    ready_timeout_s * 2) as started:
                yield RunningConfig(rewritten, started)
            return
        # The host's binary is looked up only here: an official image needs none on this machine.
        process = ManagedProcess(name=f"{rewritten.proxy} (verify)", argv=[program(rewritten), *run_args(rewritten)],
                                 log_path=rewritten.folder / PROCESS_LOG, cwd=rewritten.folder,
                                 env={**os.environ, **kind_env(rewritten)})
        with managed(process, ready, ready_timeout_s) as started:
            yield RunningConfig(rewritten, started)
    except ProcessFailed as exc:
        message, file, line = rewritten.explain_error(str(exc))
        raise UnusableInput(f"{rewritten.proxy} did not start:\n{message}", file=file, line=line) from None

