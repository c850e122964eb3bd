"""`--main PLATFORM|FILE`: the stock main config a site file is judged inside, by a platform's
name or as the user's own file; each proxy kind that reads site files has its platforms."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, TypeVar

from labs.findings import UnusableInput

P = TypeVar("P")


def chosen(name_or_file: str, platforms: Mapping[str, P], own: Callable[[Path], P]) -> P:
    """The platform named, else the user's main config file made into one by `own`."""
    if name_or_file in platforms:
        return platforms[name_or_file]
    path = Path(name_or_file)
    if not path.is_file():
        raise UnusableInput(f"--main must be {' or '.join(platforms)} or a main config file; "
                            f"no such file: {name_or_file}")
    return own(path)
