"""server.signals in-process: a stop signal raises Stopped in the main thread, waits while a step
is held (a process being started or stopped), is raised once, and whatever a thread started is
ended by stop_started(). The commands themselves are stopped for real in tests/labs/test_stop_signals.py."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from server import signals
from server.processes import ManagedProcess, wait_until


SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _send(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("sig", signals.STOP_SIGNALS, ids=lambda s: s.name)
def test_a_stop_signal_is_raised_as_stopped_and_the_handlers_come_back(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    with pytest.raises(signals.Stopped) as stopped, signals.stopped_by_signals():
        _send(sig)
        wait_until(lambda: False, 5, describe="the signal")  # interrupted by it, never times out
    assert stopped.value.exit_status == 128 + sig
    assert str(stopped.value) == f"stopped by {sig.name}"
    assert signal.getsignal(sig) is before


def test_a_held_step_ends_before_the_signal_is_raised_and_a_second_one_waits() -> None:
    finished = []
    with pytest.raises(signals.Stopped), signals.stopped_by_signals():
        with signals.held():
            _send(signal.SIGTERM)
            finished.append("held step")  # not cut short
        finished.append("after it")  # never reached: raised as the held step ends
    assert finished == ["held step"]
    with signals.stopped_by_signals():
        with pytest.raises(signals.Stopped):
            _send(signal.SIGTERM)
            wait_until(lambda: False, 5, describe="the signal")
        _send(signal.SIGINT)  # the stop is under way: this one only waits
        finished.append("stop under way")
        assert signals.stopped() is not None and signals.stopped().signal == signal.SIGTERM
    assert finished[-1] == "stop under way"


def test_a_signal_in_a_nested_held_step_asks_the_outer_one_to_end_and_is_raised_after_it() -> None:
    asked: list[int] = []
    steps = []
    with pytest.raises(signals.Stopped) as stopped, signals.stopped_by_signals():
        with signals.held(ask=asked.append):  # a server that shuts down when asked
            with signals.held():  # a process stopped inside it
                _send(signal.SIGHUP)
                steps.append("inner")
            steps.append("outer")  # not cut short: the signal waits for the outermost step
        steps.append("after")
    assert steps == ["inner", "outer"] and asked == [signal.SIGHUP]
    assert stopped.value.signal == signal.SIGHUP


def test_what_a_thread_started_is_stopped_and_the_status_is_the_signals(tmp_path: Path) -> None:
    """A main that swallows the interrupt (uvicorn.run does) still exits 128 + N, and a process
    started outside the main thread's unwinding is stopped by its PID; one started before the
    command (a test session's server) is not the command's to stop."""
    started: list[ManagedProcess] = []
    before = ManagedProcess("before", SLEEPER, tmp_path / "before.log").start()

    def main() -> int:
        process = ManagedProcess("sleeper", SLEEPER, tmp_path / "sleeper.log")
        thread = threading.Thread(target=lambda: started.append(process.start()))
        thread.start()
        thread.join()
        assert process.process is not None and process.process.poll() is None  # it runs
        try:
            _send(signal.SIGHUP)
            wait_until(lambda: False, 5, describe="the signal")
        except KeyboardInterrupt:
            pass
        return 0
    try:
        assert signals.run_stoppable(main, "test") == 128 + signal.SIGHUP
        assert started and started[0].process is not None
        assert started[0].process.poll() is not None, "the thread's process was left running"
        assert before.process is not None and before.process.poll() is None, "not the command's"
    finally:
        for process in [*started, before]:
            process.stop()
    assert started[0]._token is None and before._token is None  # stopped, so no longer tracked


def test_a_command_run_inside_another_leaves_the_stop_to_the_outer_one(tmp_path: Path) -> None:
    handler_before = signal.getsignal(signal.SIGTERM)
    inner_started: list[ManagedProcess] = []

    def inner() -> int:
        inner_started.append(ManagedProcess("inner", SLEEPER, tmp_path / "inner.log").start())
        return 0

    def outer() -> int:
        assert signals.run_stoppable(inner, "inner") == 0
        assert signal.getsignal(signal.SIGTERM) is not handler_before, "the inner one took the handlers away"
        assert inner_started[0].process is not None and inner_started[0].process.poll() is None
        _send(signal.SIGTERM)
        wait_until(lambda: False, 5, describe="the signal")
        return 0
    try:
        assert signals.run_stoppable(outer, "outer") == 128 + signal.SIGTERM
        assert inner_started[0].process is not None and inner_started[0].process.poll() is not None
        assert signal.getsignal(signal.SIGTERM) is handler_before
    finally:
        for process in inner_started:
            process.stop()


def test_run_async_returns_the_coroutines_result() -> None:
    async def answer() -> int:
        return 42
    assert signals.run_async(answer()) == 42


def test_a_signal_while_the_event_loop_is_made_is_raised_once_it_is_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race seen once in the suite (`labs verify` on SIGHUP): the signal lands inside the
    loop's constructor. It is raised after the loop exists; the loop is closed and the coroutine,
    never started, is closed (no "never awaited" warning, no traceback from a half-made loop)."""
    import asyncio
    import warnings
    made: list[asyncio.AbstractEventLoop] = []
    original = asyncio.Runner.get_loop

    def get_loop_signalled(runner: asyncio.Runner) -> asyncio.AbstractEventLoop:
        _send(signal.SIGTERM)  # lands while the loop is being made
        loop = original(runner)
        made.append(loop)
        return loop

    monkeypatch.setattr(asyncio.Runner, "get_loop", get_loop_signalled)
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn
        with pytest.raises(signals.Stopped), signals.stopped_by_signals():
            signals.run_async(work())
    assert len(made) == 1 and made[0].is_closed() and ran == []


def test_a_signal_inside_a_task_cancels_the_command_and_nothing_is_logged(tmp_path: Path) -> None:
    """Seen in CI (`labs verify` on SIGINT and SIGHUP): the signal landed inside the task that
    `asyncio.wait_for` made for a connect. Raised there, it ended that task alone; cancelling the
    rest re-raised it in the main task, whose exception nobody read, and the loop printed
    "Task exception was never retrieved" with a traceback when the task was collected. The stop
    now cancels run_async's task: every `finally` of the coroutine runs, Stopped is raised once,
    and the loop logs nothing. In a process of its own, so that its exit collects everything."""
    script = tmp_path / "command.py"
    script.write_text(textwrap.dedent("""
        import asyncio, os, signal
        from server import signals

        async def connect():
            os.kill(os.getpid(), signal.SIGINT)  # lands inside the inner task, as in create_connection
            await asyncio.sleep(30)

        async def command():
            try:
                await asyncio.wait_for(connect(), timeout=60)
            finally:
                await asyncio.sleep(0)  # an `async with` exit that awaits
                print("unwound", flush=True)

        raise SystemExit(signals.run_stoppable(lambda: signals.run_async(command()), "command"))
    """))
    done = subprocess.run([sys.executable, str(script)], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    assert done.stdout == "unwound\n"
    assert done.stderr == "command: stopped by SIGINT; nothing it started is left running\n"


def test_a_task_that_swallows_its_cancellation_still_ends_the_command() -> None:
    """A coroutine that catches the cancellation and returns normally: the stop still ends the
    command with Stopped; one that goes on waiting is ended after CANCEL_GRACE_S."""
    import asyncio

    async def stubborn() -> str:
        try:
            _send(signal.SIGTERM)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "went on"
        return "slept"

    with pytest.raises(signals.Stopped) as stopped, signals.stopped_by_signals():
        signals.run_async(stubborn())
    assert stopped.value.signal == signal.SIGTERM


def test_a_task_that_goes_on_after_its_cancellation_is_ended_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import time
    monkeypatch.setattr(signals, "CANCEL_GRACE_S", 0.2)

    async def deaf() -> None:
        try:
            _send(signal.SIGHUP)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(30)  # goes on as if nothing came

    started = time.monotonic()
    with pytest.raises(signals.Stopped) as stopped, signals.stopped_by_signals():
        signals.run_async(deaf())
    assert stopped.value.signal == signal.SIGHUP
    assert time.monotonic() - started < 10  # the grace, not the 30 s it wanted


def test_a_one_shot_command_is_ended_with_everything_it_forked(tmp_path: Path) -> None:
    """server.processes.run_to_end (mmdebstrap, apt-get): a stop signal ends the command's whole
    group, the grandchildren it forked included; under subprocess.run they ran on."""
    from server.processes import run_to_end
    pids = tmp_path / "pids"
    # A parent that forks a long sleeper and waits on it, as mmdebstrap does apt and dpkg.
    command = ["sh", "-c", f"sleep 60 & echo $! > {pids}; wait"]

    def signal_once_forked() -> None:
        wait_until(lambda: pids.exists() and pids.read_text().strip() != "", 10)
        _send(signal.SIGTERM)

    timer = threading.Thread(target=signal_once_forked)
    with pytest.raises(signals.Stopped), signals.stopped_by_signals():
        timer.start()
        run_to_end(command)
    timer.join()
    sleeper = int(pids.read_text())
    wait_until(lambda: not _running(sleeper), 5, describe="the forked sleeper to end")


def test_a_one_shot_command_returns_its_status_and_output() -> None:
    from server.processes import run_to_end
    done = run_to_end(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has ended: only its parent has not reaped it
        return stat.read().split()[2] != "Z"
