"""A progress bar for long runs (`make lab-all`, `make lab-load`) with the time left (rich).

The work is planned in expected seconds (a scenario's last wall time, a load step's length), so
the bar moves in proportion to time, and the time left is the time spent so far scaled by the
planned work still to do: start-up costs and a slow machine are in the estimate from the first
finished item on.

The bar is redrawn only when the run says something (`say`, `advance`), never by a timer thread:
the measuring client shares this process, and a refresh thread taking the GIL 10 times a second
would delay its clock readings in the middle of a stream.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, Progress, ProgressColumn, Task, TaskProgressColumn,
                           TextColumn, TimeElapsedColumn)
from rich.text import Text


def clock(seconds: float) -> str:
    """1:05 for 65 s, 1:02:03 past an hour."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class TimeLeft(ProgressColumn):
    """Elapsed time x (planned work left / planned work done); the plan itself before that."""

    def render(self, task: Task) -> Text:
        total, done = task.total or 0.0, task.completed
        if task.finished:
            return Text("done", style="progress.remaining")
        if done <= 0 or not task.elapsed:
            return Text(f"~{clock(total)} left (planned)", style="progress.remaining")
        left = task.elapsed * (total - done) / done
        return Text(f"~{clock(left)} left", style="progress.remaining")


class WorkBar:
    """`with WorkBar(console, planned_s, "lab-all") as bar: bar.say("..."); bar.advance(s)`."""

    def __init__(self, console: Console, planned_s: float, title: str) -> None:
        self.title = title
        self.progress = Progress(
            TextColumn("[bold]{task.fields[title]}[/]"), BarColumn(bar_width=30), TaskProgressColumn(),
            TimeElapsedColumn(), TimeLeft(), TextColumn("{task.description}"),
            console=console, auto_refresh=False, transient=False)
        self.task = self.progress.add_task("starting", total=max(planned_s, 1e-9), title=title)

    @property
    def console(self) -> Console:
        """Print through this, so lines appear above the bar."""
        return self.progress.console

    def __enter__(self) -> "WorkBar":
        self.progress.start()
        self.progress.refresh()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.refresh()
        self.progress.stop()

    def say(self, message: str) -> None:
        self.progress.update(self.task, description=message)
        self.progress.refresh()

    def advance(self, planned_s: float) -> None:
        self.progress.advance(self.task, planned_s)
        self.progress.refresh()

    def finish(self, message: str = "done") -> None:
        task = self.progress.tasks[0]
        self.progress.update(self.task, completed=task.total, description=message)
        self.progress.refresh()
