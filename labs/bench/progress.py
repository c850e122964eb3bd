"""The benchmarks' progress bar: every part on one bar of expected seconds, with the time left.

Redrawn by hand at each step a part announces, never from a thread: rich redraws from a thread
by default, and a thread that takes the GIL while the client's send() has released it delays
the client's clock reading after the write (measured: one-stream TTFT read 13 us, below the
loopback round trip). Within a part the bar follows the clock, up to 95% of the part's expected
time; the part's end moves it to the part's full share. rich estimates the time left from the
pace so far, so a part that runs longer than expected lengthens the estimate.
"""
from __future__ import annotations

import contextlib
import io
import time
from typing import Callable, Iterator, Mapping

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

# How far the bar may follow the clock within a part before the part says it has ended.
WITHIN_PART_CAP = 0.95
BAR_WIDTH = 16
# The bar, "100%", "0:00:00 elapsed, 0:00:00 left" and the spaces between the columns.
TIMES_WIDTH = BAR_WIDTH + 4 + 30 + 6


class BenchProgress:
    """`with BenchProgress(console, {part: expected_s}) as bar:` then `with bar.part(name):`,
    and `bar.step(message)` (the parts' `progress` callable) at each step."""

    def __init__(self, console: Console, expected_s: Mapping[str, float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self._clock = clock
        self._expected = dict(expected_s)
        # The times first, the step last, cut to what the line has left: rich would shorten
        # every column alike, the times too.
        self._bar = Progress(BarColumn(bar_width=BAR_WIDTH), TaskProgressColumn(), TimeElapsedColumn(),
                             TextColumn("elapsed,"), TimeRemainingColumn(), TextColumn("left"),
                             TextColumn("{task.description}", markup=False),
                             console=console, auto_refresh=False, get_time=clock)
        self._task = self._bar.add_task("benchmarks", total=sum(self._expected.values()) or 1.0)
        self._done_s = 0.0  # expected seconds of the parts that have ended
        self._part: str | None = None
        self._part_started = 0.0

    def __enter__(self) -> "BenchProgress":
        self._bar.start()
        self._bar.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    @property
    def completed_s(self) -> float:
        """Where the bar stands, in expected seconds."""
        return self._bar.tasks[0].completed

    @property
    def total_s(self) -> float:
        return self._bar.tasks[0].total or 0.0

    def line(self) -> str:
        """The bar as drawn now, in plain text at the console's width."""
        capture = Console(width=self.console.width, color_system=None, file=io.StringIO())
        with capture.capture() as text:
            capture.print(self._bar.get_renderable())
        return text.get().rstrip("\n")

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        self._part, self._part_started = name, self._clock()
        self.step("starting")
        try:
            yield
        finally:
            self._done_s += self._expected[name]
            self._part = None
            self._bar.update(self._task, completed=self._done_s, description=f"{name}: done")
            self._bar.refresh()

    def step(self, message: str) -> None:
        """A step begins: its line above the bar, the bar moved on by the clock, redrawn."""
        if self._part is not None and not message.startswith(self._part):
            message = f"{self._part}: {message}"
        self.console.print(escape(message), style="dim")
        completed = self._done_s
        if self._part is not None:
            elapsed = self._clock() - self._part_started
            completed += min(elapsed, WITHIN_PART_CAP * self._expected[self._part])
        room = max(10, self.console.width - TIMES_WIDTH)
        shown = message if len(message) <= room else message[:room - 1] + "…"
        self._bar.update(self._task, completed=completed, description=shown)
        self._bar.refresh()
