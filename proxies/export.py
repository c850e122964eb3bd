"""Write `proxies/fixed/` (the configs users copy) from the fixed variants, or check it is current."""
from __future__ import annotations

from pathlib import Path

from proxies.base import ProxyName, ProxySettings
from proxies.kinds import KINDS
from proxies.rendering import render
from proxies.tls import self_signed
from proxies.validation import validate
from proxies.variants import variant

FIXED_DIR = Path(__file__).resolve().parent / "fixed"
# (proxy, variant) -> the file it is exported to: each proxy's `fixed`, and the TLS/HTTP/2 ones.
EXPORTS: dict[tuple[ProxyName, str], str] = {
    (proxy, name): file for proxy, kind in KINDS.items() for name, file in kind.exports().items()}


def with_lab_certificate(settings: ProxySettings) -> ProxySettings:
    """The same settings with the TLS files (the user's, absent here) swapped for the self-signed
    pair made at run time; settings without TLS come back as they are."""
    files = settings.tls_files()
    return settings.with_(**dict(zip(files, self_signed()))) if files else settings


def exported_text(settings: ProxySettings) -> str:
    """The config as users copy it, proven valid by the binary. A TLS config names files this
    machine lacks, so the binary checks the same text with the lab's certificate in their place."""
    validate(with_lab_certificate(settings))
    return render(settings)


def fresh_exports() -> dict[str, str]:
    """File name -> text of each fixed config, rendered and validated now."""
    return {name: exported_text(variant(proxy, name_of_variant))
            for (proxy, name_of_variant), name in EXPORTS.items()}


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
