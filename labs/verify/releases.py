"""Which of the lab's releases of a proxy (proxies.releases) runs a config, and what the output
says of it: `--proxy-version X.Y[.Z]` names the version the config is written for.

- No flag: the proxy's current release (nginx 1.30, HAProxy 3.2, Caddy 2.11, Varnish 7.7; Apache,
  Envoy and Traefik have one each), and the reading judges its binary's defaults.
- A version of a series the lab has (nginx 1.22.1, HAProxy 3.2): that release runs it.
- Any other version verify knows (nginx 1.26, HAProxy 3.3, Envoy 1.30): the newest release not
  newer than it stands in, else the oldest; the output names the binary that stood in, and where
  a defaults table knows the asked version, the kind's rewrite writes its defaults into the run.
- Outside what the releases and the defaults table know (older than both, or a major version the
  lab has no release of): UnusableInput, one line (exit 2).
- `--runtime docker`: the same release, in its own image (proxies.runtime.images: its official
  image, else a stand-in made of the release's own files).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from labs.findings import UnusableInput
from labs.verify.versions import DefaultsTable, Version, shown
from proxies.binaries import BinaryProblem, check_binary
from proxies.kinds import KINDS
from proxies.releases import Release

# Why the release that runs was chosen, as the output says it.
RULES = {
    "current": "the current release the lab runs (--proxy-version chooses another)",
    "asked": "the release of the series --proxy-version names",
    "older": "the newest release it has not newer than that",
    "oldest": "none it has is that old, so its oldest",
}


def series_of(release: Release) -> Version:
    return tuple(int(part) for part in release.series.split("."))


@dataclass(frozen=True)
class RunsOn:
    """The release that runs the config, what was asked, and by which rule it was chosen."""

    proxy: str
    release: Release
    asked: str | None = None
    rule: str = "current"

    @property
    def series(self) -> str:
        return self.release.series

    @property
    def stands_in(self) -> bool:
        """A release of another series than the one asked runs it."""
        return self.asked is not None and self.asked.split(".")[:2] != self.series.split(".")

    def exact(self) -> tuple[str | None, str]:
        """(path, version) of its binary, or (None, why it cannot be said)."""
        try:
            path, version = check_binary(self.proxy, self.series)
        except BinaryProblem as exc:
            return None, str(exc)
        return path, shown(version)

    @property
    def said(self) -> str:
        """One line: "measured on nginx 1.30.6 (Debian sid): the current release ..."."""
        title = KINDS[self.proxy].binary.title
        path, version = self.exact()
        where = f", {path}" if path else ""
        what = f"{title} {version} ({self.release.source}{where})" if path else f"{title} {self.release.label}"
        if self.stands_in:
            what += f", standing in for {title} {self.asked} (--proxy-version), which the lab has no binary of"
        return f"measured on {what}: {RULES[self.rule]}"

    def to_json(self) -> dict[str, object]:
        path, version = self.exact()
        return {"proxy": self.proxy, "series": self.series, "source": self.release.source,
                "version": version if path else None, "binary": path, "asked": self.asked,
                "stands_in": self.stands_in, "rule": RULES[self.rule], "said": self.said}


def chosen(proxy: str, asked: str | None, table: DefaultsTable | None = None,
           runtime: str = "local") -> RunsOn:
    """The release of `proxy` that runs a config written for `asked` (None: the current one);
    `table`: the proxy's defaults by version, where verify keeps one (it widens what is known)."""
    kind = KINDS[proxy]
    version = None if asked is None else parse(proxy, asked, table)
    if version is None:
        return RunsOn(proxy, kind.current)
    for release in kind.releases:
        if series_of(release) == version[:2]:
            return RunsOn(proxy, release, asked, "asked")
    older = [r for r in kind.releases if series_of(r) <= version[:2]]
    return RunsOn(proxy, older[-1], asked, "older") if older else RunsOn(proxy, kind.releases[0], asked, "oldest")


def parse(proxy: str, asked: str, table: DefaultsTable | None) -> Version:
    """`asked` as a version verify knows for `proxy`, else UnusableInput in one line."""
    kind = KINDS[proxy]
    title, releases = kind.binary.title, kind.releases
    if table is not None:
        version = table.parse(asked)  # its own line for a malformed or too old version
    elif re.fullmatch(r"\d+\.\d+(\.\d+)?", asked.strip()):
        version = tuple(int(p) for p in asked.strip().split("."))
    else:
        raise UnusableInput(f"--proxy-version must look like {releases[0].series} or "
                            f"{releases[0].series}.1, not {asked!r}")
    runs = ", ".join(r.label for r in releases)
    if table is None and version[:2] < series_of(releases[0]):
        raise UnusableInput(f"--proxy-version {asked}: the lab runs {title} {runs}; verify knows no "
                            f"{title} before {releases[0].series}")
    if version[0] > series_of(releases[-1])[0]:
        raise UnusableInput(f"--proxy-version {asked}: the lab runs {title} {runs}; verify knows no "
                            f"{title} {version[0]}")
    return version
