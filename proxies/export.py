"""Write `proxies/fixed/` (the configs users copy) from the fixed variants, or check it is current.

A kind runs more than one release (proxies.releases). Each fixed variant is rendered for each of
them; releases whose renders are the same text share one file, which claims them all, and a
release whose render differs (a directive renamed between versions) gets a file of its own,
named after its series (`Caddyfile-2.6`). The file of the current release keeps the kind's own
name. Each file's header names the releases it is proven on, and each of their binaries
validates it before it is written."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from proxies.base import ProxyName, ProxySettings
from proxies.kinds import KINDS
from proxies.releases import Release
from proxies.rendering import render
from proxies.tls import self_signed
from proxies.validation import validate
from proxies.variants import variant

FIXED_DIR = Path(__file__).resolve().parent / "fixed"


@dataclass(frozen=True)
class Export:
    """One file of proxies/fixed/: a fixed variant as each of `releases` renders it (the same text)."""

    proxy: ProxyName
    variant: str
    file: str
    releases: tuple[Release, ...]  # oldest first; the current release's file has the kind's name
    others: tuple[tuple[str, tuple[Release, ...]], ...] = ()  # the variant's other files, their releases

    @property
    def series(self) -> tuple[str, ...]:
        return tuple(release.series for release in self.releases)

    def settings(self, series: str | None = None) -> ProxySettings:
        """The variant for one release it claims (default: the newest)."""
        chosen = series or self.series[-1]
        if chosen not in self.series:
            raise ValueError(f"{self.file} is for {self.proxy} {', '.join(self.series)}, not {chosen}")
        return variant(self.proxy, self.variant).with_(version=chosen)

    @property
    def header(self) -> str:
        """The comment lines saying which releases the file is proven on, and where the others are."""
        title = KINDS[self.proxy].binary.title
        lines = [f"# Proven on {title} {_labels(self.releases)}: each release's binary validates it and the",
                 "# lab's tests run it (tests/proxies, tests/verify/test_fixed.py, tests/reliability)."]
        lines += [f"# For {title} {_labels(releases)}: {file}; the two differ where a comment names the version."
                  for file, releases in self.others]
        own_name = KINDS[self.proxy].exports()[self.variant]
        if self.file != own_name:
            lines.append(f"# Save it as {own_name}: the lines below name it so.")
        return "".join(line + "\n" for line in lines)

    def text(self, settings: ProxySettings | None = None) -> str:
        """The file's text: the render (of `settings`, default: the newest release's variant), its
        header after the first comment line (the title)."""
        lines = render(settings or self.settings()).splitlines(keepends=True)
        title = next(index for index, line in enumerate(lines) if line.startswith("#"))
        return "".join(lines[:title + 1]) + self.header + "".join(lines[title + 1:])


def _labels(releases: tuple[Release, ...]) -> str:
    labels = [release.label for release in releases]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def release_file(file: str, series: str) -> str:
    """The file of a release whose render differs from the current one's: `nginx.conf` ->
    `nginx-1.22.conf`, `Caddyfile` -> `Caddyfile-2.6`."""
    path = PurePosixPath(file)
    return f"{path.stem}-{series}{path.suffix}"


def _exports_of(proxy: ProxyName) -> list[Export]:
    kind = KINDS[proxy]
    made = []
    for name, file in kind.exports().items():
        groups: dict[str, list[Release]] = {}
        for release in kind.releases:
            text = render(variant(proxy, name).with_(version=release.series))
            groups.setdefault(text, []).append(release)
        files = {(file if kind.current in releases else release_file(file, releases[-1].series)): tuple(releases)
                 for releases in groups.values()}
        made += [Export(proxy, name, own, releases, tuple((other, theirs) for other, theirs in files.items()
                                                         if other != own))
                 for own, releases in files.items()]
    return made


@cache
def exports() -> dict[str, Export]:
    """File name in proxies/fixed/ -> what it holds, for every kind's fixed variants."""
    return {export.file: export for proxy in KINDS for export in _exports_of(proxy)}


def export_for(proxy: ProxyName, name: str = "fixed", series: str | None = None) -> Export:
    """The file that holds a variant for one release (default: the current one)."""
    wanted = KINDS[proxy].release(series)
    return next(export for export in exports().values()
                if export.proxy == proxy and export.variant == name and wanted in export.releases)


def with_lab_certificate(settings: ProxySettings) -> ProxySettings:
    """The same settings with the TLS files (the user's, absent here) swapped for the self-signed
    pair made at run time; settings without TLS come back as they are."""
    files = settings.tls_files()
    return settings.with_(**dict(zip(files, self_signed()))) if files else settings


def proven_text(export: Export) -> str:
    """The file as users copy it, validated by the binary of every release it claims. A TLS
    config names files this machine lacks, so each binary checks the same text with the lab's
    certificate in their place."""
    for series in export.series:
        settings = with_lab_certificate(export.settings(series))
        validate(export.text(settings), export.proxy, series)
    return export.text()


def fresh_exports() -> dict[str, str]:
    """File name -> text of each fixed config, rendered and validated now."""
    return {name: proven_text(export) for name, export in exports().items()}


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
