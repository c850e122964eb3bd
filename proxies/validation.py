"""Prove a rendered config valid with the proxy's own binary, before anything runs it."""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from proxies.base import PROXY_NAMES, ProxyName, ProxySettings
from proxies.binaries import binary
from proxies.rendering import render

CONFIG_NAMES: dict[ProxyName, str] = {"nginx": "nginx.conf", "haproxy": "haproxy.cfg", "envoy": "envoy.yaml",
                                      "varnish": "varnish.vcl", "apache": "apache.conf", "caddy": "Caddyfile"}
_valid: set[tuple[str, str]] = set()  # (proxy, sha256 of text) already proven valid in this process


class ConfigInvalid(ValueError):
    """The proxy's binary rejected a config; `output` is the binary's own message."""

    def __init__(self, proxy: ProxyName, output: str, config_text: str) -> None:
        self.proxy = proxy
        self.output = output.strip()
        self.config_text = config_text
        super().__init__(f"{proxy} rejected the config:\n{self.output}")


def check_command(proxy: ProxyName, folder: Path, config_name: str) -> list[str]:
    """The binary's check-only invocation for a config file inside `folder` (binds nothing)."""
    config = folder / config_name
    if proxy == "nginx":
        # -p: every relative path resolves inside the throwaway folder; -e: early errors to
        # stderr, not to the compiled-in /var/log/nginx/error.log (needs no root).
        return [binary("nginx"), "-t", "-q", "-p", f"{folder}/", "-c", config_name, "-e", "stderr"]
    if proxy == "haproxy":
        return [binary("haproxy"), "-c", "-f", str(config)]
    if proxy == "varnish":
        # -C compiles the VCL to C (printed on stderr) and runs nothing; the compiler's
        # scratch files land in the working folder.
        # -j none: as root Varnish would read the file as its own user, which the private
        # throwaway folder keeps out.
        return [binary("varnish"), "-C", "-j", "none", "-f", str(config)]
    if proxy == "apache":
        # -d: the throwaway folder is the ServerRoot, so relative log and pid paths resolve there.
        return [binary("apache"), "-t", "-d", str(folder), "-f", str(config)]
    if proxy == "caddy":
        return [binary("caddy"), "validate", "--config", str(config), "--adapter", "caddyfile"]
    return [binary("envoy"), "--mode", "validate", "-c", str(config), "-l", "error"]


def check_env(proxy: ProxyName, folder: Path) -> dict[str, str] | None:
    """The environment the check runs in (None: inherited). Caddy keeps its state under HOME
    and the XDG folders: point them at the throwaway folder, so nothing lands in the user's."""
    if proxy != "caddy":
        return None
    return {**os.environ, "HOME": str(folder), "XDG_CONFIG_HOME": str(folder), "XDG_DATA_HOME": str(folder)}


def validate(config: ProxySettings | str, proxy: ProxyName | None = None) -> str:
    """Check a config (settings are rendered first) with its binary; return the checked text.

    Raises ConfigInvalid carrying the binary's message. A text validated once in this process is
    not checked again.
    """
    if isinstance(config, ProxySettings):
        if proxy is not None and proxy != config.proxy:
            raise ValueError(f"settings are for {config.proxy}, not {proxy}")
        proxy, text = config.proxy, render(config)
    else:
        if proxy not in PROXY_NAMES:
            raise ValueError(f"validating a config text needs proxy= one of {', '.join(PROXY_NAMES)}")
        text = config
    key = (proxy, hashlib.sha256(text.encode()).hexdigest())
    if key in _valid:
        return text
    with tempfile.TemporaryDirectory(prefix=f"streamlab-validate-{proxy}-") as tmp:
        folder = Path(tmp)
        (folder / CONFIG_NAMES[proxy]).write_text(text)
        result = subprocess.run(check_command(proxy, folder, CONFIG_NAMES[proxy]), cwd=folder,
                                env=check_env(proxy, folder), capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        output = result.stderr + result.stdout
        if proxy == "varnish":  # the compiler's message, not the C it printed before failing
            output = output.split("/* ---===###")[0]
        raise ConfigInvalid(proxy, output or f"exit status {result.returncode}", text)
    _valid.add(key)
    return text
