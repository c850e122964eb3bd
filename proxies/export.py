"""Write `proxies/fixed/` (the configs users copy) from the fixed variants, or check it is current."""
from __future__ import annotations

from pathlib import Path

from proxies.base import PROXY_NAMES
from proxies.rendering import render
from proxies.validation import validate
from proxies.variants import variant

FIXED_DIR = Path(__file__).resolve().parent / "fixed"


def fresh_exports() -> dict[str, str]:
    """File name -> text of each fixed config, rendered and validated now."""
    exports: dict[str, str] = {}
    for proxy in PROXY_NAMES:
        settings = variant(proxy, "fixed")
        exports[settings.config_name] = validate(render(settings), proxy)
    return exports


def stale_files(directory: Path = FIXED_DIR) -> list[Path]:
    """Files in `directory` that differ from a fresh export (or are missing)."""
    return [directory / name for name, text in fresh_exports().items()
            if not (directory / name).is_file() or (directory / name).read_text() != text]


def export(directory: Path = FIXED_DIR) -> list[Path]:
    """Rewrite the fixed configs; returns the files whose content changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in fresh_exports().items():
        path = directory / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
