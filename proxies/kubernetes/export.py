"""Render each proxy kind's Kubernetes manifests from its fixed settings (`ProxyKind.kubernetes`) and
the MCP route's constants (`proxies/fixed_mcp.py`):
`proxies/fixed/kubernetes/` (kept equal to a fresh render by a test), or `--k8s DIR`."""
from __future__ import annotations

import re
from pathlib import Path

from proxies import fixed_mcp
from proxies.fixed_settings import LONGEST_ANSWER
from proxies.kinds import KINDS
from proxies.kubernetes.validate import validate_text
from proxies.rendering import render_template

K8S_DIR = Path(__file__).resolve().parents[1] / "fixed" / "kubernetes"


def seconds(duration: str | int) -> int:
    """"300s", "5m", 300 -> whole seconds (ingress-nginx takes integers)."""
    found = re.fullmatch(r"(\d+)(s|m|h)?", str(duration).strip())
    if found is None:
        raise ValueError(f"not a duration in whole seconds: {duration!r}")
    return int(found[1]) * {"s": 1, "m": 60, "h": 3600}[found[2] or "s"]


def manifests() -> dict[str, str]:
    """File name -> the manifests' text, each object validated against its schema."""
    out = {}
    for kind in KINDS.values():
        for file, template in kind.kubernetes:
            text = render_template(template, {"settings": kind.fixed(), "seconds": seconds,
                                              "longest_answer": LONGEST_ANSWER, "mcp": fixed_mcp})
            validate_text(text)
            out[file] = text
    return out


def stale(directory: Path = K8S_DIR) -> list[Path]:
    return [directory / name for name, text in manifests().items()
            if not (directory / name).is_file() or (directory / name).read_text() != text]


def write(directory: Path = K8S_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in manifests().items():
        path = directory / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
