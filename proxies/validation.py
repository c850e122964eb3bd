"""Prove a rendered config valid with the proxy's own binary, before anything runs it."""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from proxies.base import ProxyName, ProxySettings
from proxies.binaries import binary
from proxies.kinds import KINDS, kind_of
from proxies.rendering import render

_valid: set[tuple[str, str, str]] = set()  # (proxy, series, sha256 of text) already proven valid in this process


class ConfigInvalid(ValueError):
    """The proxy's binary rejected a config; `output` is the binary's own message."""

    def __init__(self, proxy: ProxyName, output: str, config_text: str) -> None:
        self.proxy = proxy
        self.output = output.strip()
        self.config_text = config_text
        super().__init__(f"{proxy} rejected the config:\n{self.output}")


def check_command(proxy: ProxyName, folder: Path, series: str | None = None) -> list[str]:
    """The binary's check-only invocation, by the release of that series (default: the current
    one), for the proxy's config file inside `folder`, which is also its prefix (binds nothing;
    whatever the check writes stays in the throwaway folder)."""
    kind = KINDS[proxy]
    release = kind.release(series)
    return [binary(proxy, release.series), *kind.check(str(folder / kind.config_name), f"{folder}/"),
            *kind.release_args(release)]


def validate(config: ProxySettings | str, proxy: ProxyName | None = None, series: str | None = None) -> str:
    """Check a config (settings are rendered first) with its binary, of the settings' release or
    `series` (default: the current one); return the checked text.

    Raises ConfigInvalid carrying the binary's message. A text validated once in this process is
    not checked again.
    """
    if isinstance(config, ProxySettings):
        if proxy is not None and proxy != config.proxy:
            raise ValueError(f"settings are for {config.proxy}, not {proxy}")
        proxy, text, series = config.proxy, render(config), series or config.version
    else:
        if proxy is None:
            raise ValueError(f"validating a config text needs proxy= one of {', '.join(KINDS)}")
        text = config
    kind = kind_of(proxy)
    series = kind.release(series).series
    key = (proxy, series, hashlib.sha256(text.encode()).hexdigest())
    if key in _valid:
        return text
    with tempfile.TemporaryDirectory(prefix=f"streamlab-validate-{proxy}-") as tmp:
        folder = Path(tmp)
        (folder / kind.config_name).write_text(text)
        result = subprocess.run(check_command(proxy, folder, series), cwd=folder,
                                env={**os.environ, **kind.env(f"{folder}/")}, capture_output=True,
                                text=True, timeout=60)
    refusal = kind.check_refusal(result.returncode, result.stderr + result.stdout)
    if refusal is not None:
        raise ConfigInvalid(proxy, refusal, text)
    _valid.add(key)
    return text
