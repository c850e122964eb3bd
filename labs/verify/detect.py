"""Which proxy a config file is for, when --proxy is not given: by its shape, then its name."""
from __future__ import annotations

import re
from pathlib import Path

from labs.findings import UnusableInput

PROXIES = ("nginx", "haproxy", "envoy")


def detect(path: Path) -> str:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"cannot read it: {exc}", file=str(path)) from None
    if re.search(r"^\s*(static_resources|admin|dynamic_resources|node)\s*:", text, re.M):
        return "envoy"
    if re.search(r"^\s*(http|events|server|upstream|stream)\s*(\S+\s*)?\{", text, re.M):
        return "nginx"
    if re.search(r"^(global|defaults|frontend|backend|listen)(\s+\S+)*\s*$", text, re.M):
        return "haproxy"
    name = path.name.lower()
    for proxy in PROXIES:
        if proxy in name:
            return proxy
    raise UnusableInput("cannot tell which proxy this config is for; pass --proxy nginx|haproxy|envoy",
                        file=str(path))
