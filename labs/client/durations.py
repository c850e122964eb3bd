"""How a measured duration is written for people: the client records seconds (results), every
report, verdict and table prints milliseconds, and this is the one place that turns one into the
other. It sits in the client, the lowest floor of labs/, so every product and the finding judges
can import it.
"""
from __future__ import annotations


def milliseconds(seconds: float | None, *, digits: int = 0, unit: bool = True, grouped: bool = False) -> str:
    """`seconds` in milliseconds, rounded to `digits` decimals (Python's format: half to even on
    the binary value), "-" when nothing was measured.

    unit: " ms" after the figure; a table whose column header names the unit leaves it off.
    grouped: thousands separated by commas ("1,234 ms"), as the lab's reports print them; a
        verdict's text prints "1234 ms", as the recorded verdicts and the docs quote them.
    """
    if seconds is None:
        return "-"
    figure = f"{seconds * 1000:{',' if grouped else ''}.{digits}f}"
    return f"{figure} ms" if unit else figure
