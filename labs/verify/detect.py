"""Which proxy a config file is for, when --proxy is not given: by its shape, then its name."""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.readers import PROXIES, READERS
from labs.verify.model import read_text


def detect(path: Path) -> str:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    text = read_text(path)
    for kind in READERS.values():
        if kind.shape.search(text):
            return kind.proxy
    name = path.name.lower()
    for proxy in PROXIES:
        if proxy in name:
            return proxy
    raise UnusableInput(f"cannot tell which proxy this config is for; pass --proxy {'|'.join(PROXIES)}",
                        file=str(path))
