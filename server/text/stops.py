"""Stop sequences over streamed text: with hold-back (correct) and without (the failure mode).

Text arrives in pieces (one per token). A stop like "\\n\\nUser:" may span several pieces, so
a piece that ends in what could be the start of a stop cannot be sent yet: `StopMatcher` holds
back the longest suffix that is a proper prefix of some stop, and releases it as soon as the next
piece rules the stop out, or at the end of generation (`flush`). The client never sees any part
of a stop, and sees everything else exactly once.

`NaiveStopMatcher` (`server-stop-holdback`, broken variant) checks after sending: it cuts the
piece in which a stop completes, but the stop's beginning already left in earlier pieces.
"""
from __future__ import annotations

from typing import Protocol, Sequence


class StopHandler(Protocol):
    stopped: bool

    def push(self, text: str) -> str:
        """Text that may go to the client now; sets `stopped` when a stop sequence matched."""

    def flush(self) -> str:
        """Held text released at the end of generation (none after a stop matched)."""


class NoStops:
    """The common case, kept free of any per-piece work."""

    __slots__ = ("stopped",)

    def __init__(self) -> None:
        self.stopped = False

    def push(self, text: str) -> str:
        return text

    def flush(self) -> str:
        return ""


def _earliest_stop(text: str, stops: Sequence[str]) -> int:
    """Index of the first stop occurrence in text, or -1."""
    best = -1
    for stop in stops:
        at = text.find(stop)
        if at != -1 and (best == -1 or at < best):
            best = at
    return best


class StopMatcher:
    __slots__ = ("_stops", "_held", "stopped")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def _holdback_length(self, text: str) -> int:
        """Length of the longest suffix of text that is a proper prefix of some stop."""
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def push(self, text: str) -> str:
        if self.stopped:
            return ""
        # Only the held tail and the new piece can contain a stop that was not seen before: the
        # released text was ruled out when it was released.
        window = self._held + text
        at = _earliest_stop(window, self._stops)
        if at != -1:
            self.stopped = True
            self._held = ""
            return window[:at]
        keep = self._holdback_length(window)
        self._held = window[len(window) - keep:] if keep else ""
        return window[:len(window) - keep]

    def flush(self) -> str:
        held, self._held = ("" if self.stopped else self._held), ""
        return held


class NaiveStopMatcher:
    """Checks for a stop only in text that is being sent: earlier pieces already leaked."""

    __slots__ = ("_stops", "_tail", "_tail_size", "stopped")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._tail_size = max((len(s) for s in self._stops), default=1) - 1
        self._tail = ""  # recent text already sent, to find stops that span pieces
        self.stopped = False

    def push(self, text: str) -> str:
        if self.stopped:
            return ""
        window = self._tail + text
        at = _earliest_stop(window, self._stops)
        if at != -1:
            self.stopped = True
            # Cut what is still ours to cut: the part of this piece before the stop.
            return text[:max(0, at - len(self._tail))]
        self._tail = window[len(window) - self._tail_size:] if self._tail_size else ""
        return text

    def flush(self) -> str:
        return ""


def stop_handler(stops: Sequence[str], holdback: bool = True) -> StopHandler:
    if not stops:
        return NoStops()
    return StopMatcher(stops) if holdback else NaiveStopMatcher(stops)
