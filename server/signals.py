"""A stop signal ends a command as a normal exit does: every process it started is stopped first.

A CI job's timeout, `timeout`, systemd and a container stop send SIGTERM, a closed terminal
SIGHUP, Ctrl-C SIGINT. Under Python's own handlers SIGTERM and SIGHUP end the interpreter on the
spot, and the servers and proxies a command started (each in a session of its own,
server.processes) ran on, orphaned: `labs verify` sent SIGTERM mid-run left the lab's server and
nginx running. Inside `stopped_by_signals()` each of the three raises `Stopped` in the main thread
instead, so every `with` block the command is in unwinds and stops what it started (processes by
PID, containers by id, temporary folders) exactly as on a normal exit. `Stopped` is a
KeyboardInterrupt so that asyncio and pytest treat it as the interrupt it is: asyncio logs and
drops any other exception raised in one of its callbacks, pytest fails one test with it and runs
the next. What a thread started is out of the main thread's unwinding: each start is `track`ed
until its stop, and `stop_started()` ends whatever is left. While `run_async`'s event loop runs, a
stop cancels its task instead (as asyncio's own runner does for Ctrl-C): raised inside whichever
task the loop was stepping, the interrupt ended that task alone with an exception nobody read, and
the loop logged it as a traceback on the way out.

    return run_stoppable(lambda: verify(args), "python -m labs verify")  # 128 + N after signal N
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Iterator, TypeVar

Result = TypeVar("Result")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; the exit status is the shell's for it, 128 + its number."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum)
        super().__init__(f"stopped by {self.signal.name}")

    @property
    def exit_status(self) -> int:
        return 128 + int(self.signal)


@dataclass
class _State:
    depth: int = 0  # 1 inside the stopped_by_signals() block that set the handlers
    held: int = 0  # depth of held() blocks in the main thread
    pending: int | None = None  # a signal that arrived while held
    stopped: Stopped | None = None  # raised: the stop is under way, further signals only wait
    closing: bool = False  # the command has ended: its last stops run, a signal only waits too
    since: int = 0  # the first token of this block: what was started before it is not its own
    ask: Callable[[int], object] | None = None  # how the held step asks itself to end (held(ask=))
    task: asyncio.Task[Any] | None = None  # run_async's task while its loop runs here: a stop cancels it


_state = _State()
_started: dict[int, Callable[[], object]] = {}  # token -> the stop of something started, not yet stopped
_next_token = 0
_lock = threading.Lock()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


# A task that catches its cancellation and goes on is ended the old way after this long.
CANCEL_GRACE_S = 5.0


def _raise(signum: int) -> None:
    _state.stopped = Stopped(signum)
    task = _state.task
    if task is not None and not task.done():
        task.cancel()  # every `async with` and `finally` of the coroutine unwinds; run_async raises
        task.get_loop().call_later(CANCEL_GRACE_S, _raise_if_running, task)  # also wakes a waiting select()
        return
    raise _state.stopped


def _raise_if_running(task: asyncio.Task[Any]) -> None:
    if not task.done() and _state.stopped is not None:
        raise _state.stopped  # out of the loop: it swallowed its cancellation


def _on_signal(signum: int, frame: object) -> None:
    if _state.stopped is not None or _state.closing:
        return  # the stop under way is bounded (server.processes: SIGKILL after its grace)
    if _state.held:
        _state.pending = _state.pending or signum
        if _state.ask is not None:
            _state.ask(signum)
        return
    _raise(signum)


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[bool]:
    """SIGTERM, SIGINT and SIGHUP raise `Stopped` in this block (the previous handlers come back
    after it); yields whether this block set them. Python only lets the main thread set handlers:
    elsewhere this does nothing; inside another such block, the outer one keeps them."""
    if not _in_main_thread() or _state.depth:
        yield False
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in STOP_SIGNALS}
    _state.depth, _state.since = 1, _next_token
    try:
        yield True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _state.depth, _state.held, _state.pending, _state.stopped, _state.closing = 0, 0, None, None, False


@contextlib.contextmanager
def held(ask: Callable[[int], object] | None = None) -> Iterator[None]:
    """A step that must not be cut in half (a process started but not yet tracked, one being
    stopped, a server shutting down on its own): a stop signal that arrives in it is raised when
    the outermost such step ends. `ask(signum)`: how to ask the step to end soon (a server's own
    graceful shutdown), called on each stop signal that arrives in it."""
    if not _in_main_thread():
        yield
        return
    _state.held += 1
    asked, _state.ask = _state.ask, ask or _state.ask
    try:
        yield
    finally:
        _state.held -= 1
        _state.ask = asked
        if not _state.held:
            signum, _state.pending = _state.pending, None
            if signum is not None and _state.stopped is None:
                _raise(signum)



def run_async(coroutine: Coroutine[Any, Any, Result]) -> Result:
    """asyncio.run, stoppable. The event loop and the task are made whole before a stop signal may
    land (one inside the loop's constructor left half a loop whose finalizer printed a traceback);
    a signal while the loop runs cancels the task, which unwinds, and `Stopped` is raised here."""
    runner = asyncio.Runner()
    own = _in_main_thread() and _state.task is None
    try:
        with held():
            loop = runner.get_loop()
            task = loop.create_task(coroutine)
            if own:
                _state.task = task
        try:
            result = loop.run_until_complete(task)
        except BaseException as failure:  # cancelled by the stop, or whatever its unwinding raised
            if own and _state.stopped is not None and failure is not _state.stopped:
                raise _state.stopped from failure
            raise
        finally:
            if own:
                _state.task = None
            if own and _state.stopped is not None and task.done() and not task.cancelled():
                task.exception()  # read: the stop is reported once, by run_stoppable, not by the loop
    finally:
        with held():  # the tasks left are cancelled and finished here, as asyncio.run does
            runner.close()
        if inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:
            coroutine.close()  # never started, the stop came first: no "never awaited" warning
    if own and _state.stopped is not None:
        raise _state.stopped  # the task caught its cancellation and ended: the stop still ends the command
    return result


def stopped() -> Stopped | None:
    """The stop under way in this `stopped_by_signals()` block, if a signal came."""
    return _state.stopped


def track(stop: Callable[[], object]) -> int:
    """Remember how to stop something just started; `untrack(token)` once it is stopped."""
    global _next_token
    with _lock:
        token, _next_token = _next_token, _next_token + 1
        _started[token] = stop
    return token


def untrack(token: int) -> None:
    with _lock:
        _started.pop(token, None)


def stop_started() -> int:
    """Stop whatever was started in this `stopped_by_signals()` block and is not stopped yet, the
    newest first (what was started before it, a test session's server, is not the block's);
    how many there were."""
    count = 0
    while True:
        with _lock:
            own = [token for token in _started if token >= _state.since]
            if not own:
                return count
            stop = _started.pop(max(own))
        with contextlib.suppress(Exception):  # each is stopped whatever another one did
            stop()
        count += 1


def run_stoppable(main: Callable[[], int], prog: str) -> int:
    """main()'s exit status; after a stop signal, 128 + its number, once everything it started
    is stopped (one line on stderr says so)."""
    with stopped_by_signals() as own:
        if not own:  # run inside another command (or a thread): the outer one stops it all
            return main()
        try:
            status = main()
        except Stopped as stop:
            status = stop.exit_status
        finally:
            stopping, _state.closing = _state.stopped, True
            stop_started()
    if stopping is not None:  # also where something on the way swallowed the interrupt (uvicorn.run)
        status = stopping.exit_status
        print(f"{prog}: {stopping}; nothing it started is left running", file=sys.stderr, flush=True)
    return status
