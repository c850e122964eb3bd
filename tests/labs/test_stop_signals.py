"""Every command of the user's path, stopped mid-run by SIGTERM (a CI job's timeout, `timeout`,
systemd, a container stop), SIGINT (Ctrl-C) or SIGHUP (a closed terminal), stops every process it
started as a normal exit does, and exits 128 + the signal's number (server/signals.py).

Each case runs the real command in a child process, polls until it has started what it starts
(its server and proxy, Locust) or until the lab server the test runs carries its streams (probe,
load), sends the signal to the command alone (as `kill PID` does), and polls, with a bound, until
every process it started, and every other process of their groups, has ended. Before the change
`labs verify` sent SIGTERM exited at once and left the lab's server and nginx running.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from server.launcher import ServerHandle, running_server
from server.processes import STOP_GRACE_S, free_port, wait_until
from server.signals import STOP_SIGNALS
from tests.view.conftest import _answers

psutil = pytest.importorskip("psutil")
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
NGINX_CONFIG = REPO_ROOT / "proxies" / "fixed" / "nginx.conf"
START_BOUND_S = 120.0  # a command's start on a machine busy with other tests
# The scenarios' server without the model (LAB_ENGINE): what is stopped is the same processes.
SYNTHETIC = {"LAB_ENGINE": "synthetic"}
ACTIVE = "streamlab_active_streams"
Processes = list["psutil.Process"]


@dataclass
class Case:
    """A command as a user runs it; `up`: what shows it mid-run, given its descendants so far."""

    argv: list[str]
    up: Callable[[Processes], bool]
    env: dict[str, str]
    cwd: Path = REPO_ROOT
    mid_run: Callable[[], None] = lambda: None  # a step of the test's own once it is up (serve)
    started: Callable[[Processes], bool] = lambda found: True  # what it started, by then


def _cmdline(process: "psutil.Process") -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _server_and_proxy(found: Processes) -> bool:
    lines = [_cmdline(p) for p in found]
    return any(" -m server " in line for line in lines) and any("nginx" in line for line in lines)


def _alive(process: "psutil.Process") -> bool:
    try:  # is_running() compares the start time too: a reused PID is not this process
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group(process: "psutil.Process") -> int | None:
    try:
        return os.getpgid(process.pid)
    except ProcessLookupError:
        return None


def _in_groups(groups: set[int]) -> list[str]:
    """Every live process of these process groups (a proxy's workers share its group)."""
    left = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if os.getpgid(process.pid) in groups and _alive(process):
                left.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, psutil.Error):
            continue
    return left


def _streaming(server: ServerHandle) -> bool:
    return server.metrics().get(ACTIVE, 0.0) > 0


@pytest.fixture(scope="module")
def lab_server() -> Iterator[ServerHandle]:
    """The canary origin probe and load measure (started by the test, not by them)."""
    with running_server(["--engine", "synthetic", "--http", "h11", "--slots", "64"]) as server:
        yield server


def _labs(*args: str) -> list[str]:
    return [sys.executable, "-m", "labs", *args]


def _serve_case(tmp_path: Path) -> Case:
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def prepare() -> None:  # a page's Run: the scenario's server and both variants' proxies
        request = urllib.request.Request(f"{url}/api/scenarios/nginx-buffering/prepare", data=b"{}",
                                         method="POST", headers={"content-type": "application/json",
                                                                 "origin": url})
        with urllib.request.urlopen(request, timeout=START_BOUND_S) as response:
            json.load(response)
    return Case(_labs("serve", "--port", str(port), "--out", str(tmp_path)), lambda found: _answers(url + "/"),
                SYNTHETIC, mid_run=prepare, started=_server_and_proxy)


def _case(command: str, tmp_path: Path, request: pytest.FixtureRequest) -> Case:
    if command == "verify":
        return Case(_labs("verify", str(NGINX_CONFIG), "--quick"), _server_and_proxy, {})
    if command == "run":
        return Case(_labs("run", "nginx-buffering", "--out", str(tmp_path)), _server_and_proxy, SYNTHETIC)
    if command == "run-all":
        return Case(_labs("run-all", "--out", str(tmp_path)), _server_and_proxy, SYNTHETIC)
    if command == "serve":
        return _serve_case(tmp_path)
    if command == "plugin":  # a user's suite: one test of theirs and the plugin's
        (tmp_path / "test_mine.py").write_text("def test_mine():\n    pass\n")
        # --stream-config=FILE: given apart, pytest would take the file's folder, this checkout,
        # for the suite's root and read its pyproject.toml.
        return Case([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--stream-config={NGINX_CONFIG}",
                     "-k", "buffering or mine"], _server_and_proxy,
                    {"PYTHONPATH": str(REPO_ROOT)}, cwd=tmp_path)
    server: ServerHandle = request.getfixturevalue("lab_server")
    if command == "probe":  # it starts nothing: mid-run is its streams on the test's server
        return Case(_labs("probe", f"{server.url}/v1"), lambda found: _streaming(server), {})
    assert command == "load"  # bounded: a one-stream baseline and one step of one stream
    return Case(_labs("load", f"{server.url}/v1", "--streams", "1", "--duration", "4", "--locust",
                      "--workers", "1", "--out", str(tmp_path)),
                lambda found: sum("locust" in _cmdline(p) for p in found) >= 2 and _streaming(server), {})


COMMANDS = ("verify", "probe", "load", "run", "run-all", "serve", "plugin")


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_stop_signal_stops_what_the_command_started(command: str, sig: signal.Signals, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    case = _case(command, tmp_path, request)
    log = tmp_path / "command.log"
    seen: dict[int, psutil.Process] = {}
    with open(log, "wb") as output:
        # A session of its own: the test's cleanup reaches the command and anything left in its group.
        child = subprocess.Popen(case.argv, cwd=case.cwd, env={**os.environ, **case.env}, stdin=subprocess.DEVNULL,
                                 stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    command_process = psutil.Process(child.pid)

    def descendants() -> Processes:
        try:
            for process in command_process.children(recursive=True):
                seen.setdefault(process.pid, process)
        except psutil.NoSuchProcess:
            pass
        return list(seen.values())

    def still_running() -> None:
        if child.poll() is not None:
            raise AssertionError(f"{command} ended before it was signalled ({child.returncode}):\n"
                                 + log.read_text(errors="replace")[-3000:])
    groups = {child.pid}  # the process groups of what it started, as found
    try:
        wait_until(lambda: case.up(descendants()), START_BOUND_S, describe=f"{command} to be mid-run",
                   alive=still_running)
        case.mid_run()
        found = descendants()
        assert case.started(found), [_cmdline(p) for p in found]
        groups |= {group for p in found if (group := _group(p)) is not None} - {os.getpgrp()}
        signalled = time.monotonic()
        child.send_signal(sig)  # the command alone, not its group: its own handling is what is tested
        # Each process it started gets STOP_GRACE_S on SIGTERM before SIGKILL, one after another.
        bound = STOP_GRACE_S * (len(found) + 2)
        while child.poll() is None and time.monotonic() - signalled < bound:
            descendants()  # anything it starts while stopping is watched too
            time.sleep(0.02)
        assert child.poll() is not None, f"{command} did not exit within {bound:.0f} s of {sig.name}"
        # Ended by the command on its way out: nothing of what it started may outlive it.
        left = lambda: [_cmdline(p)[:120] for p in seen.values() if _alive(p)] + _in_groups(groups)  # noqa: E731
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: not left(), STOP_GRACE_S, describe=f"the processes {command} started to end")
        assert left() == [], f"left running after {command} exited on {sig.name}"
        if command in ("probe", "load"):  # its streams left the server: the departure happened
            server: ServerHandle = request.getfixturevalue("lab_server")
            wait_until(lambda: not _streaming(server), STOP_GRACE_S, describe="the streams to leave")
        output_text = log.read_text(errors="replace")
        assert child.returncode == 128 + sig, output_text[-3000:]
        assert f"stopped by {sig.name}" in output_text, output_text[-3000:]
        assert "Traceback" not in output_text, output_text[-3000:]  # an orderly stop, not a crash
    finally:
        # By group first (a proxy's workers would outlive a master killed alone), then by PID.
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for process in [command_process, *seen.values()]:
            if _alive(process):
                process.kill()
        child.wait(timeout=10)
