"""Start a local process, poll it until ready, stop it by its PID: the one way this project runs things.

Used for the model server and for each proxy, by the labs and the tests alike. It lives in the
lowest layer (labs -> proxies -> server) so that every layer may use it: `server.launcher` starts
the model server with it, `proxies.runtime` the proxies.
"""
from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from server import signals


class ProcessFailed(RuntimeError):
    """A managed process exited early or never became ready; the message carries its log tail."""


# STREAMLAB_PORTS=LOW-HIGH: take ports from that range only. The test suite gives each of its
# parallel workers a range of its own, below the kernel's ephemeral ports, so two workers never
# pick the same port in the moment between choosing it and a process binding it.
PORTS_VARIABLE = "STREAMLAB_PORTS"


def _port_range() -> tuple[int, int] | None:
    text = os.environ.get(PORTS_VARIABLE, "")
    if not text:
        return None
    low, _, high = text.partition("-")
    if not (low.isdigit() and high.isdigit() and 0 < int(low) <= int(high) < 65536):
        raise ValueError(f"{PORTS_VARIABLE}={text!r}: expected LOW-HIGH, e.g. 20000-21999")
    return int(low), int(high)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the kernel picks it, or one from STREAMLAB_PORTS;
    a tiny race with other programs remains)."""
    span = _port_range()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if span is None:
            sock.bind((host, 0))
            return sock.getsockname()[1]
    low, high = span
    size = high - low + 1
    global _next_port
    if _next_port is None:  # each process starts elsewhere in the range, then goes on in turn
        _next_port = random.randrange(size)
    for _ in range(size):
        port = low + _next_port % size
        _next_port += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {PORTS_VARIABLE}={low}-{high}")


# Where free_port goes on in STREAMLAB_PORTS: ports handed out in turn, as the kernel does, so two
# picked before either is bound are never the same one (a random pick repeated one in ~1,000).
_next_port: int | None = None


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.02,
               describe: str = "condition", alive: Callable[[], None] | None = None) -> None:
    """Poll `predicate` until it holds; `alive` raises if the thing we wait on has died."""
    deadline = time.monotonic() + timeout_s
    while True:
        if alive is not None:
            alive()
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:.1f}s waiting for {describe}")
        time.sleep(interval_s)


# How long stop() lets a process end on SIGTERM before SIGKILL ends its group.
STOP_GRACE_S = 5.0


@dataclass
class ManagedProcess:
    """A child process with its output in a log file, stopped by PID (its whole process group)."""

    name: str
    argv: Sequence[str]
    log_path: Path
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    process: subprocess.Popen | None = field(default=None, init=False)
    # Its stop, tracked from its start to its stop (server.signals.stop_started ends what is left).
    _token: int | None = field(default=None, init=False, repr=False)

    def start(self) -> "ManagedProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        # A stop signal waits until the process is tracked: none starts unseen by stop_started.
        with signals.held():
            try:
                self.process = subprocess.Popen(
                    list(self.argv), cwd=self.cwd, env=dict(self.env) if self.env is not None else None,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    # Own process group, so stop() also reaches workers the process forks (nginx).
                    start_new_session=True)
            finally:
                log.close()
            self._token = signals.track(self.stop)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        assert self.process is not None, "not started"
        code = self.process.poll()
        if code is not None:
            raise ProcessFailed(f"{self.name} exited with status {code}:\n{self.log_tail()}")

    def wait_ready(self, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        try:
            wait_until(predicate, timeout_s, describe=f"{self.name} to become ready",
                       alive=self.check_alive)
        except TimeoutError as exc:
            self.stop()
            raise ProcessFailed(f"{exc}\n{self.log_tail()}") from None
        except ProcessFailed:
            self.stop()
            raise

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the process group, SIGKILL it after `grace_s`; returns the exit status.
        A stop signal does not cut it short (server.signals.held): it is raised once it is done."""
        if self.process is None:
            return None
        with signals.held():
            if self.process.poll() is None:
                _signal_group(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    _signal_group(self.process.pid, signal.SIGKILL)
                    self.process.wait(timeout=grace_s)
            # Workers that outlived their master (nginx) share its group id.
            _signal_group(self.process.pid, signal.SIGKILL)
            if self._token is not None:
                signals.untrack(self._token)
                self._token = None
        return self.process.returncode


def run_to_end(argv: Sequence[str], env: Mapping[str, str] | None = None,
               capture: bool = True) -> subprocess.CompletedProcess[str]:
    """subprocess.run for a one-shot command that forks (mmdebstrap, apt-get), in a process group
    of its own that a stop signal ends whole: under subprocess.run, `labs setup` stopped by
    SIGTERM left mmdebstrap and the apt and dpkg it had started running on (seen for more than
    5 s, writing into .proxies/). Output is captured as text unless `capture` is False."""
    pipe = subprocess.PIPE if capture else None
    with signals.held():  # tracked from its start: stop_started() reaches it
        process = subprocess.Popen(list(argv), env=dict(env) if env is not None else None,
                                   stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, text=True,
                                   start_new_session=True)
        token = signals.track(lambda: _end_group(process))
    try:
        out, err = process.communicate()
    except BaseException:  # Stopped (a KeyboardInterrupt) included: the whole group goes
        _end_group(process)
        raise
    finally:
        signals.untrack(token)
    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)


def _end_group(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    with signals.held():
        _signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(process.pid, signal.SIGKILL)  # and whatever it forked, done or not
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@contextlib.contextmanager
def managed(process: ManagedProcess, ready: Callable[[], bool],
            timeout_s: float = 30.0, grace_s: float = STOP_GRACE_S) -> Iterator[ManagedProcess]:
    """Start, wait until ready, yield, and stop even when the body raises (or a stop signal
    arrives as it starts). `grace_s`: how long it may take to end on SIGTERM; a command that
    stops processes of its own on the way out needs theirs too, or SIGKILL orphans them."""
    try:
        process.start()
        process.wait_ready(ready, timeout_s)
        yield process
    finally:
        process.stop(grace_s)
